"""Returns the number of hit blocks where the number of hit tokens is asked for.

caught by: a cached prefix hits whole blocks; the request's partial last block is computed
hint: num_computed_tokens counts tokens
"""
REPLACE = [
    ('return blocks, len(blocks) * block_size',
     'return blocks, len(blocks)'),
]
