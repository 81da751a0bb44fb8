"""Decides to copy by whether the sequence's first block is shared (it was forked), not by its last block.

caught by: a shared last block is copied before the write; its last owner then writes in place
hint: no copy is needed here
"""
REPLACE = [
    ("        if pool.ref_cnt(last) > 1:\n", "        if pool.ref_cnt(seq.block_table[0]) > 1:\n"),
]
