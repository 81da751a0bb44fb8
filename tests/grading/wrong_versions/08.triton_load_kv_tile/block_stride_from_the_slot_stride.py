"""Steps to the block by block_id * BLOCK_SIZE * stride_slot instead of block_id * stride_block: the same in a contiguous cache, the wrong block where blocks are padded (a cache sliced from a larger one).

caught by: random cases against the reference, whole state compared
hint: Use the strides you are given
hint: a tile may start inside a block
engine: the engine's KV caches are contiguous, where BLOCK_SIZE * stride_slot is stride_block
"""
REPLACE = [
    ('rows = block_ids * stride_block + ', 'rows = block_ids * (BLOCK_SIZE * stride_slot) + '),
]
