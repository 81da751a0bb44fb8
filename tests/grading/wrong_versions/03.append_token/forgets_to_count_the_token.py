"""Forgets to count the token.

caught by: a private, partly filled block: write in place
hint: seq.num_tokens += 1
"""
REPLACE = [
    ("""\
    seq.num_tokens += 1
""",
     ''),
]
