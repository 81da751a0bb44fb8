"""Checks max_num_seqs once, before admitting: with room for one more, the whole queue may join.

caught by: max_num_seqs caps the batch; a finished request's place is refilled
hint: nobody behind it may join
"""
REPLACE = [
    ("""\
    while waiting and len(running) < max_num_seqs:
""",
     """\
    room = len(running) < max_num_seqs
    while waiting and room:
"""),
]
