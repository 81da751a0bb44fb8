"""Widens the row offset to int64 only after block_id * stride_block was computed in int32 (too late: it already overflowed).

caught by: what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids
hint: .to(tl.int64)
pattern: int64 block ids
pattern: what only a GPU would show (Triton)
"""
REPLACE = [
    ('block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)',
     'block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0)'),
    ('rows = block_ids * stride_block + (pos % BLOCK_SIZE) * stride_slot + kv_head * stride_head',
     'rows = (block_ids * stride_block).to(tl.int64) + (pos % BLOCK_SIZE) * stride_slot + kv_head * stride_head'),
]
