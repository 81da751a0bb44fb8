"""Replaces the shared last block by binding a new list (seq.block_table = seq.block_table[:-1] + [new]).

caught by: a shared last block is copied before the write; its last owner then writes in place
hint: bound a new object to seq.block_table
pattern: rebinds what it must change in place
"""
REPLACE = [
    ("            seq.block_table[-1] = new\n", "            seq.block_table = seq.block_table[:-1] + [new]\n"),
]
