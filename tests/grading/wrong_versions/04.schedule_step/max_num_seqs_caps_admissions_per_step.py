"""Reads max_num_seqs as the number of requests admitted per step, not the number running.

caught by: max_num_seqs caps the batch; a finished request's place is refilled
hint: nobody behind it may join
"""
REPLACE = [
    ("""\
    while waiting and len(running) < max_num_seqs:
""",
     """\
    admitted = 0
    while waiting and admitted < max_num_seqs:
        admitted += 1
"""),
]
