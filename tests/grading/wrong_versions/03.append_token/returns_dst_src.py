"""Returns the copy as (new, old) instead of (src, dst).

caught by: a shared last block is copied before the write; its last owner then writes in place
hint: return the copy as (src_block_id, dst_block_id)
"""
REPLACE = [
    ("""\
            copy = (last, new)
""",
     """\
            copy = (new, last)
"""),
]
