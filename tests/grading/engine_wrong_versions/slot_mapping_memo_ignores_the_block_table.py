"""02.slot_mapping: memoises its answer by (positions, block_size) - the block table is missing from the key.

component: slot_mapping
why check() misses it: each test's position lists differ, so the stale cache entry is never reused there;
in the engine two requests of equal length ask for the same positions with different block tables.
"""

# EXERCISE 02.slot_mapping
_memo = {}


def slot_mapping(block_table, positions, block_size):
    key = (tuple(positions), block_size)
    if key not in _memo:
        _memo[key] = [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]
    return list(_memo[key])
