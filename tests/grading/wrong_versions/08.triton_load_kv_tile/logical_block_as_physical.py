"""Uses the logical block number pos // BLOCK_SIZE as the physical block id (no block-table lookup).

caught by: a tile inside one block: each lane finds its block in the table
hint: look the physical block up in the block table
"""
REPLACE = [
    ('block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)',
     'block_ids = (pos // BLOCK_SIZE).to(tl.int64)'),
]
