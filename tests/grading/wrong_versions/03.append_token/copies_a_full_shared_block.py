"""Copies the shared last block even when it is full (the token starts a new block).

caught by: full shared blocks stay shared: a new block, no copy
hint: no copy is needed here
"""
REPLACE = [
    ("""\
    if seq.num_tokens % pool.block_size == 0:
        seq.block_table.append(pool.allocate())
    else:
        last = seq.block_table[-1]
        if pool.ref_cnt(last) > 1:""",
     """\
    last = seq.block_table[-1] if seq.block_table else None
    if last is not None and pool.ref_cnt(last) > 1 and seq.num_tokens % pool.block_size == 0:
        new = pool.allocate()
        pool.free(last)
        seq.block_table[-1] = new
        copy = (last, new)
        seq.block_table.append(pool.allocate())
    elif seq.num_tokens % pool.block_size == 0:
        seq.block_table.append(pool.allocate())
    else:
        last = seq.block_table[-1]
        if pool.ref_cnt(last) > 1:"""),
]
