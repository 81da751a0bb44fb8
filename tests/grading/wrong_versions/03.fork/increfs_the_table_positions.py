"""Increments the reference count of each table position (0, 1, 2, ...) instead of each block id.

caught by: fork at a block boundary, and fork of a one-token sequence
hint: a reference was never given back
"""
REPLACE = [
    ("""\
    for block_id in parent.block_table:
        pool.incref(block_id)
""",
     """\
    for i in range(len(parent.block_table)):
        pool.incref(i)
"""),
]
