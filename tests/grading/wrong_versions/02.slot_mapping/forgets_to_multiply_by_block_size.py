"""Forgets to multiply by block_size.

caught by: the tokens of a single block
hint: multiply the block id by block_size
"""
REPLACE = [
    ('block_table[pos // block_size] * block_size + pos % block_size',
     'block_table[pos // block_size] + pos % block_size'),
]
