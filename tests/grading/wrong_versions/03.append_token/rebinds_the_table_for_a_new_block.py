"""Adds a new block by binding a new list (seq.block_table = seq.block_table + [block]).

caught by: a token that starts a new block allocates one
hint: bound a new object to seq.block_table
pattern: rebinds what it must change in place
"""
REPLACE = [
    ("        seq.block_table.append(pool.allocate())\n", "        seq.block_table = seq.block_table + [pool.allocate()]\n"),
]
