"""Vectorises with torch like the model runner and returns the tensor (the engine takes a list or tuple of ints).

caught by: random cases against the reference, whole state compared
hint: return a list of ints, one per position
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]",
     """    import torch

    pos = torch.tensor(positions, dtype=torch.int64)
    return torch.tensor(block_table, dtype=torch.int64)[pos // block_size] * block_size + pos % block_size"""),
]
