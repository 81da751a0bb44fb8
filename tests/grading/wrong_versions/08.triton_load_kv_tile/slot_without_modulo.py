"""Uses the position itself as the slot inside the block (pos * stride_slot instead of (pos % BLOCK_SIZE) * stride_slot).

caught by: a tile inside one block: each lane finds its block in the table
hint: the slot inside the block is pos % BLOCK_SIZE
"""
REPLACE = [
    ('(pos % BLOCK_SIZE) * stride_slot', 'pos * stride_slot'),
]
