"""Clips only the waiting requests by the budget: a running request's chunk may overrun it.

caught by: a long prompt is split into chunks by the token budget
hint: more than max_num_batched_tokens
"""
REPLACE = [
    ("""\
        n = chunk(req)
        if n <= 0:
            continue
""",
     """\
        n = min(req.num_tokens - req.num_computed_tokens, long_prefill_token_threshold or 10**9)
        if n <= 0:
            continue
"""),
]
