"""Swaps // and %.

caught by: the tokens of a single block
"""
REPLACE = [
    ('block_table[pos // block_size] * block_size + pos % block_size',
     'block_table[pos % block_size] * block_size + pos // block_size'),
]
