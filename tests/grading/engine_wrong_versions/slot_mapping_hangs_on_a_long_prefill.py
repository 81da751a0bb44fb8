"""02.slot_mapping: never returns for more than 12 positions (a prefill longer than any unit test's list).

component: slot_mapping
why check() misses it: it misbehaves only when the engine calls it (it looks for the engine's frames on
the stack): a part that games its unit tests. check()'s random cases catch the honest version of this mistake.
"""

# EXERCISE 02.slot_mapping


def slot_mapping(block_table, positions, block_size):
    while len(positions) > 12 and _in_engine():
        pass
    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]


def _in_engine():
    """True when the engine called this part (its frames are on the stack); check() never does."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(("pagedlab.engine", "pagedlab.model")):
            return True
        frame = frame.f_back
    return False
