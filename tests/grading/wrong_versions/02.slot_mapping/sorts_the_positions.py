"""Sorts the caller's positions in place first (positions.sort()), then maps them.

caught by: random block tables, positions in any order, block sizes 1, 3 and 16
hint: slot_mapping changed positions, which it only reads
pattern: changes an input it only reads
engine: the engine hands slot_mapping positions already in order, so sorting them changes nothing
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]\n",
     """\
    order = sorted(range(len(positions)), key=positions.__getitem__)
    positions.sort()
    slots = [0] * len(positions)
    for i, pos in zip(order, positions):
        slots[i] = block_table[pos // block_size] * block_size + pos % block_size
    return slots
"""),
]
