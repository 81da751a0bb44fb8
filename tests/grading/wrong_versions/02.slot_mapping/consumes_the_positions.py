"""Pops the positions off the caller's list as it maps them, leaving it empty.

caught by: the tokens of a single block
hint: slot_mapping changed positions, which it only reads
pattern: changes an input it only reads
"""
REPLACE = [
    ("    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]\n",
     """\
    slots = []
    while positions:
        pos = positions.pop(0)
        slots.append(block_table[pos // block_size] * block_size + pos % block_size)
    return slots
"""),
]
