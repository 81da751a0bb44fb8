"""Assumes every tile starts at a block boundary: lane i reads block tile_start // BLOCK_SIZE + i // BLOCK_SIZE, slot i % BLOCK_SIZE. Right while BLOCK_N is a multiple of the block size; wrong for a tile that starts inside a block (BLOCK_N smaller than BLOCK_SIZE, as vLLM's unified kernel runs with 16-lane tiles over blocks of 32).

caught by: random cases against the reference, whole state compared
hint: Use the strides you are given
hint: a tile may start inside a block
engine: the kit's Triton kernel runs tiles of 16 or 128 lanes over the engine's blocks of 16: every tile starts at a block boundary
"""
REPLACE = [
    ("""\
    block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)
    rows = block_ids * stride_block + (pos % BLOCK_SIZE) * stride_slot + kv_head * stride_head
""",
     """\
    lane = tl.arange(0, BLOCK_N)
    block_ids = tl.load(block_table_ptr + tile_start // BLOCK_SIZE + lane // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)
    rows = block_ids * stride_block + (lane % BLOCK_SIZE) * stride_slot + kv_head * stride_head
"""),
]
