"""Vectorises with numpy and returns the numpy array (the engine takes a list of ints).

caught by: the tokens of a single block
hint: the contract of slot_mapping: a list of ints
hint: slot_mapping returned a ndarray, not a list
pattern: returns another container or number type
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]",
     """    import numpy as np

    pos = np.asarray(positions, dtype=np.int64)
    return np.asarray(block_table, dtype=np.int64)[pos // block_size] * block_size + pos % block_size"""),
]
