"""Swaps requests back in without checking max_num_seqs (only admission from waiting checks it).

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ("""\
    while not preempted and swapped and len(running) < max_num_seqs:
""",
     """\
    while not preempted and swapped:
"""),
]
