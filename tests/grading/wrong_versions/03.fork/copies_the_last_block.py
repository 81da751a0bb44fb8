"""Copies the partly filled last block at fork time (eager copy) instead of sharing it.

caught by: fork shares every block and allocates nothing
hint: nothing is allocated or copied
"""
REPLACE = [
    ("""\
    for block_id in parent.block_table:
        pool.incref(block_id)
    return Seq(child_id, list(parent.block_table), parent.num_tokens)""",
     """\
    table = list(parent.block_table)
    for block_id in table[:-1]:
        pool.incref(block_id)
    if table and parent.num_tokens % pool.block_size:
        table[-1] = pool.allocate()
    elif table:
        pool.incref(table[-1])
    return Seq(child_id, table, parent.num_tokens)"""),
]
