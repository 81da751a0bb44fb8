"""Vectorises with numpy and returns the numpy array (the engine takes a list or tuple of ints).

caught by: random cases against the reference, whole state compared
hint: return a list of ints, one per position
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]",
     """    import numpy as np

    pos = np.asarray(positions, dtype=np.int64)
    return np.asarray(block_table, dtype=np.int64)[pos // block_size] * block_size + pos % block_size"""),
]
