"""Copies even a private block.

caught by: a private, partly filled block: write in place
hint: no copy is needed here
"""
REPLACE = [
    ('if pool.ref_cnt(last) > 1:',
     'if pool.ref_cnt(last) >= 1:'),
]
