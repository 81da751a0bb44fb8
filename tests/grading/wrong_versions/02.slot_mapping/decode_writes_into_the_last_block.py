"""A single position (a decode step) goes into the table's last block, whatever the position.

caught by: random cases against the reference, whole state compared
engine: the engine's decode position always falls in the table's last block (the block is allocated for that very token), so the last block is the right one there
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]",
     """    if len(positions) == 1:  # decode: the new token goes into the last block
        return [block_table[-1] * block_size + positions[0] % block_size]
    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]"""),
]
