"""Keeps the block ids in int32: block_id * stride_block overflows once the cache passes 2**31 elements.

caught by: what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids
hint: .to(tl.int64)
pattern: int64 block ids
pattern: what only a GPU would show (Triton)
"""
REPLACE = [
    ('block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)',
     'block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0)'),
]
