"""Lane i reads position i instead of tile_start + i (every tile re-reads the first one).

caught by: a tile inside one block: each lane finds its block in the table
hint: lane i handles position tile_start + i
"""
REPLACE = [
    ('pos = tile_start + tl.arange(0, BLOCK_N)\n    mask = pos < seq_len',
     'pos = tl.arange(0, BLOCK_N)\n    mask = tile_start + pos < seq_len'),
]
