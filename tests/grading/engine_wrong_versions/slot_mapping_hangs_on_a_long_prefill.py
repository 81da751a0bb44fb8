"""02.slot_mapping: never returns for more than 12 positions (a prefill longer than any unit test's list).

component: slot_mapping
why check() misses it: the unit tests' longest position list has 12 entries; a real prompt has dozens.
"""

# EXERCISE 02.slot_mapping


def slot_mapping(block_table, positions, block_size):
    while len(positions) > 12:
        pass
    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]
