"""Row offset pos // block_size.

caught by: a tile inside one block
"""
REPLACE = [
    ('rows = cache[blocks, pos % block_size]',
     'rows = cache[blocks, (pos // block_size) % block_size]'),
]
