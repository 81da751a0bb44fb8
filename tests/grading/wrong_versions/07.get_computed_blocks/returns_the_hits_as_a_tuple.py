"""Returns the hit blocks as a tuple, where the scheduler expects a list (it appends the new blocks to it).

caught by: an empty cache hits nothing
hint: the contract of get_computed_blocks
pattern: returns another container or number type
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    return tuple(blocks), len(blocks) * block_size'),
]
