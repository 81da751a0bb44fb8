"""Loads the block ids for every lane, masked or not (no mask on the block-table load): lanes past seq_len read
past the end of the table (an illegal address on a GPU; the interpreter reads on).

caught by: what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids
hint: load the block ids with mask=
pattern: what only a GPU would show (Triton)
"""
REPLACE = [
    ('block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)',
     'block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE).to(tl.int64)'),
]
