"""Maps the first position, then walks the following slots one by one, as if the positions were consecutive.

caught by: random block tables, positions in any order, block sizes 1, 3 and 16
engine: the model runner hands slot_mapping one run of consecutive positions, so counting up from the first gives the same slots
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]",
     """    if not positions:
        return []
    out = []
    blk, off = divmod(positions[0], block_size)
    for _ in positions:
        out.append(block_table[blk] * block_size + off)
        off += 1
        if off == block_size:
            blk, off = blk + 1, 0
    return out"""),
]
