"""Returns [blocks, num_computed_tokens], a list, where the engine expects the pair as a tuple.

caught by: random cases against the reference, whole state compared
hint: return a tuple (blocks, num_computed_tokens)
pattern: returns another container or number type
engine: the engine's bridge unpacks the pair whatever sequence it is (blocks, num = result); vLLM's contract and check() want a tuple
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    return [blocks, len(blocks) * block_size]'),
]
