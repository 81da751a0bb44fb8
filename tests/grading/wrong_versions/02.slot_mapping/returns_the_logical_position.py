"""Returns the logical position.

caught by: the tokens of a single block
hint: that is the logical position
"""
REPLACE = [
    ('block_table[pos // block_size] * block_size + pos % block_size',
     'pos'),
]
