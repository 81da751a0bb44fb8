"""Releases the shared block twice (free before and after the copy).

caught by: a shared last block is copied before the write; its last owner then writes in place
hint: a holder never took its reference
"""
REPLACE = [
    ("""\
            pool.free(last)
""",
     """\
            pool.free(last)
            pool.free(last)
"""),
]
