"""Off by one at block boundaries: the block index is (pos + 1) // block_size.

caught by: follow the block table, not the logical order
"""
REPLACE = [
    ('block_table[pos // block_size] * block_size + pos % block_size',
     'block_table[(pos + 1) // block_size if (pos + 1) // block_size < len(block_table) else -1] * block_size + pos % block_size'),
]
