"""Gives a running request past its prompt exactly 1 token (a decode), not all it misses: a request several tokens behind (speculative decoding) falls behind.

caught by: random cases against the reference, whole state compared
hint: tokens behind (the engine appended several
engine: a running request past its prompt misses one token a step in this engine (no speculative decoding): one token is all it misses
"""
REPLACE = [
    ("""\
    def chunk(req):
        n = req.num_tokens - req.num_computed_tokens
""",
     """\
    def chunk(req):
        if req.num_computed_tokens >= req.num_prompt_tokens:
            n = 1
        else:
            n = req.num_tokens - req.num_computed_tokens
"""),
]
