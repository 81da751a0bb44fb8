"""Schedules 1 token for a running request whose prompt is computed (a decode), its missing tokens only during its prefill.

caught by: running requests several tokens behind (3 tokens per step, as with speculative decoding): each gets all
hint: gets all the tokens it misses
pattern: running requests several tokens behind
engine: a running request misses one token a step in this engine (no speculative decoding, and lab 04's step takes no budget, so no prefill is cut): one token is all it misses
"""
REPLACE = [
    ("""\
    for req in running:
        n = req.num_tokens - req.num_computed_tokens
""",
     """\
    for req in running:
        n = req.num_tokens - req.num_computed_tokens
        if req.num_computed_tokens >= req.num_prompt_tokens:
            n = min(n, 1)
"""),
]
