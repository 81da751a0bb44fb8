"""Off by one in the mask: pos <= seq_len.

caught by: the last tile: positions past seq_len are masked and never look up the table
hint: a bool per lane
"""
REPLACE = [
    ("""\
    mask = pos < seq_len
""",
     """\
    mask = pos <= seq_len
"""),
]
