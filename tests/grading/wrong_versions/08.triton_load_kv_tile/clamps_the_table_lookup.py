"""Keeps the block-table lookup in range by clamping the position (tl.minimum(pos, seq_len - 1)) instead of masking the load: the values come out right, but the load is unmasked, and a GPU faults where a clamp is off by one.

caught by: what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids
hint: load the block ids with mask=
pattern: what only a GPU would show (Triton)
"""
REPLACE = [
    ('block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)',
     'block_ids = tl.load(block_table_ptr + tl.minimum(pos, seq_len - 1) // BLOCK_SIZE).to(tl.int64)'),
]
