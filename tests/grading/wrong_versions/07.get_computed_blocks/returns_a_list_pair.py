"""Returns [blocks, num_computed_tokens], a list, where the engine expects the pair as a tuple.

caught by: random cases against the reference, whole state compared
pattern: returns another container or number type
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    return [blocks, len(blocks) * block_size]'),
]
