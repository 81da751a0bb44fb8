"""Schedules 1 token for every running request (a decode is one token), whatever it misses.

caught by: running requests several tokens behind (3 tokens per step, as with speculative decoding): each gets all
hint: gets all the tokens it misses
"""
REPLACE = [
    ("""\
    for req in running:
        n = req.num_tokens - req.num_computed_tokens
""",
     """\
    for req in running:
        n = 1 if req.num_computed_tokens else req.num_tokens
"""),
]
