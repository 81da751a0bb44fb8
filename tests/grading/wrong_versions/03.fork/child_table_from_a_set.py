"""Builds the child's table from a set of the parent's blocks (one reference per distinct block), losing the order.

caught by: random cases against the reference, whole state compared
hint: keep the parent's order
engine: in the plugged settings a parent's table holds distinct blocks in id order, so a set of them iterates in the same order
"""
REPLACE = [
    ("""\
    for block_id in parent.block_table:
        pool.incref(block_id)
    return Seq(child_id, list(parent.block_table), parent.num_tokens)
""",
     """\
    shared = set(parent.block_table)
    for block_id in shared:
        pool.incref(block_id)
    return Seq(child_id, list(shared), parent.num_tokens)
"""),
]
