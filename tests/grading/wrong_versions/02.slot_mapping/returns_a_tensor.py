"""Returns an int64 tensor of slots where the engine reads a list (the values are right).

caught by: the tokens of a single block
hint: the contract of slot_mapping: a list of ints
hint: slot_mapping returned a Tensor, not a list
pattern: returns another container or number type
"""
REPLACE = [
    ('return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]',
     'import torch\n\n    return torch.tensor([block_table[pos // block_size] * block_size + pos % block_size for pos in positions])'),
]
