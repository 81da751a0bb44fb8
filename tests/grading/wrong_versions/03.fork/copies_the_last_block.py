"""Copies the partly filled last block at fork time (eager copy) instead of sharing it.

caught by: fork shares every block and allocates nothing
hint: nothing is allocated or copied
"""
REPLACE = [
    ('    for block_id in parent.block_table:\n        pool.incref(block_id)\n    return Seq(child_id, list(parent.block_table), parent.num_tokens)',
     '    table = list(parent.block_table)\n    for block_id in table[:-1]:\n        pool.incref(block_id)\n    if table and parent.num_tokens % pool.block_size:\n        table[-1] = pool.allocate()\n    elif table:\n        pool.incref(table[-1])\n    return Seq(child_id, table, parent.num_tokens)'),
]
