"""Copies the last block only when exactly two sequences share it (ref_cnt == 2), not three or more.

caught by: parallel sampling: 4 samples of a 10-token prompt decode 9 tokens each
hint: Copy the block first
engine: the plugged settings fork n = 2 samples at most at a time, so a shared last block has ref_cnt 2 when append_token sees it
"""
REPLACE = [
    ("        if pool.ref_cnt(last) > 1:\n", "        if pool.ref_cnt(last) == 2:\n"),
]
