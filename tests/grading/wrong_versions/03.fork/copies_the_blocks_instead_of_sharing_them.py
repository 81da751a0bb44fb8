"""Copies the blocks instead of sharing them.

caught by: fork shares every block and allocates nothing
hint: nothing is allocated or copied
"""
REPLACE = [
    ("""\
    for block_id in parent.block_table:
        pool.incref(block_id)
    return Seq(child_id, list(parent.block_table), parent.num_tokens)""",
     '    return Seq(child_id, [pool.allocate() for _ in parent.block_table], parent.num_tokens)'),
]
