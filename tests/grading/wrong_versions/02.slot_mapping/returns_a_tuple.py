"""Returns a tuple of slots where the engine reads a list.

caught by: the tokens of a single block
hint: the contract of slot_mapping: a list of ints
hint: slot_mapping returned a tuple, not a list
pattern: returns another container or number type
"""
REPLACE = [
    ('return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]',
     'return tuple(block_table[pos // block_size] * block_size + pos % block_size for pos in positions)'),
]
