"""Writes into a shared block (no copy).

caught by: a shared last block is copied before the write; its last owner then writes in place
hint: Copy the block first
"""
REPLACE = [
    ('if pool.ref_cnt(last) > 1:',
     'if False:'),
]
