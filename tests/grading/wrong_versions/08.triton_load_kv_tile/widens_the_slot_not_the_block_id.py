"""Widens the slot offset to int64 ((pos % BLOCK_SIZE).to(tl.int64)) but leaves the block ids int32: block_id * stride_block still overflows.

caught by: what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids
hint: .to(tl.int64)
pattern: int64 block ids
pattern: what only a GPU would show (Triton)
"""
REPLACE = [
    ('block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)',
     'block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0)'),
    ('rows = block_ids * stride_block + (pos % BLOCK_SIZE) * stride_slot + kv_head * stride_head',
     'rows = block_ids * stride_block + (pos % BLOCK_SIZE).to(tl.int64) * stride_slot + kv_head * stride_head'),
]
