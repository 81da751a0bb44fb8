"""Copies but never releases the shared block.

caught by: a shared last block is copied before the write; its last owner then writes in place
hint: a reference was never given back
"""
REPLACE = [
    ("""\
            pool.free(last)
""",
     ''),
]
