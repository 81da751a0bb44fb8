"""Swaps requests back in without checking max_num_seqs (only admission from waiting checks it).

caught by: random cases against the reference, whole state compared
hint: at most max_num_seqs
engine: no swapped request comes back to a full batch in these settings: the same schedule; check() builds that state
"""
REPLACE = [
    ("""\
    while not preempted and swapped and len(running) < max_num_seqs:
""",
     """\
    while not preempted and swapped:
"""),
]
