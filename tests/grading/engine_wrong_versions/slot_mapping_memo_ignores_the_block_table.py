"""02.slot_mapping: memoises its answer by (positions, block_size) - the block table is missing from the key.

component: slot_mapping
why check() misses it: it misbehaves only when the engine calls it (it looks for the engine's frames on
the stack): a part that games its unit tests. check()'s random cases catch the honest version of this mistake;
in the engine two requests of equal length ask for the same positions with different block tables.
"""

# EXERCISE 02.slot_mapping
_memo = {}


def slot_mapping(block_table, positions, block_size):
    key = (tuple(positions), block_size)
    if key not in _memo or not _in_engine():
        _memo[key] = [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]
    return list(_memo[key])


def _in_engine():
    """True when the engine called this part (its frames are on the stack); check() never does."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(("pagedlab.engine", "pagedlab.model")):
            return True
        frame = frame.f_back
    return False
