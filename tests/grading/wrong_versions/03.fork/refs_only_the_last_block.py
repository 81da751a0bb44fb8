"""Takes a reference only on the last (partly filled) block, as if only that one could be written.

caught by: fork shares every block and allocates nothing
hint: a holder never took its reference
"""
REPLACE = [
    ("""\
    for block_id in parent.block_table:
        pool.incref(block_id)
""",
     """\
    if parent.block_table:
        pool.incref(parent.block_table[-1])
"""),
]
