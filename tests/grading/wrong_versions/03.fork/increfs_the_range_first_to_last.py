"""Shares every block id from the parent's first to its last block, as if a table were one contiguous run.

caught by: random cases against the reference, whole state compared
engine: in the plugged settings a parent's table is one run of consecutive block ids, so the range from first to last is the table
"""
REPLACE = [
    ("""\
    for block_id in parent.block_table:
        pool.incref(block_id)
    return Seq(child_id, list(parent.block_table), parent.num_tokens)
""",
     """\
    first, last = parent.block_table[0], parent.block_table[-1]
    for block_id in range(first, last + 1):
        pool.incref(block_id)
    return Seq(child_id, list(range(first, last + 1)), parent.num_tokens)
"""),
]
