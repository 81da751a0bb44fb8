"""Counts logical blocks from the first position given, as if every call started at block 0 (a chunk that starts mid-prompt).

caught by: a decode step maps only the newest position
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]",
     """    first = min(positions, default=0) // block_size * block_size
    return [block_table[(pos - first) // block_size] * block_size + pos % block_size for pos in positions]"""),
]
