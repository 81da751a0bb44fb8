"""Copies the shared last block even when it is full (the token starts a new block).

caught by: full shared blocks stay shared: a new block, no copy
hint: no copy is needed here
"""
REPLACE = [
    ('    if seq.num_tokens % pool.block_size == 0:\n        seq.block_table.append(pool.allocate())\n    else:\n        last = seq.block_table[-1]\n        if pool.ref_cnt(last) > 1:',
     '    last = seq.block_table[-1] if seq.block_table else None\n    if last is not None and pool.ref_cnt(last) > 1 and seq.num_tokens % pool.block_size == 0:\n        new = pool.allocate()\n        pool.free(last)\n        seq.block_table[-1] = new\n        copy = (last, new)\n        seq.block_table.append(pool.allocate())\n    elif seq.num_tokens % pool.block_size == 0:\n        seq.block_table.append(pool.allocate())\n    else:\n        last = seq.block_table[-1]\n        if pool.ref_cnt(last) > 1:'),
]
