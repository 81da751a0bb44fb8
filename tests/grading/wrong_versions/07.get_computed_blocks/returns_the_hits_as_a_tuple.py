"""Returns the hit blocks as a tuple, where the scheduler expects a list (it appends the new blocks to it).

caught by: random cases against the reference, whole state compared
hint: return a tuple (blocks, num_computed_tokens)
pattern: returns another container or number type
engine: the engine's bridge copies the hits into a list (list(blocks)) before the scheduler appends to it; check() wants the list the contract names
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    return tuple(blocks), len(blocks) * block_size'),
]
