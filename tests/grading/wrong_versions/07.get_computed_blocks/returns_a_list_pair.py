"""Returns [blocks, num_computed_tokens], a list, where the engine expects the pair as a tuple.

caught by: an empty cache hits nothing
hint: the contract of get_computed_blocks
pattern: returns another container or number type
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    return [blocks, len(blocks) * block_size]'),
]
