"""Row offset pos // block_size.

caught by: a tile inside one block
hint: lane i reads position pos = tile_start + i
"""
REPLACE = [
    ('rows = cache[blocks, pos % block_size]',
     'rows = cache[blocks, (pos // block_size) % block_size]'),
]
