"""Copies the last block only when exactly two sequences share it (ref_cnt == 2), not three or more.

caught by: parallel sampling: 4 samples of a 10-token prompt decode 9 tokens each
hint: Copy the block first
"""
REPLACE = [
    ("        if pool.ref_cnt(last) > 1:\n", "        if pool.ref_cnt(last) == 2:\n"),
]
