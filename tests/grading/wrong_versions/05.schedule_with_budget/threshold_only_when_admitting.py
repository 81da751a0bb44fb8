"""Applies long_prefill_token_threshold only to waiting requests: a running request finishing its prefill gets the rest of its prompt at once.

caught by: long_prefill_token_threshold caps a chunk even when budget remains
hint: a chunk may not exceed long_prefill_token_threshold
"""
REPLACE = [
    ("""\
    for req in running:
        if budget <= 0:
            break
        n = chunk(req)
""",
     """\
    for req in running:
        if budget <= 0:
            break
        n = min(req.num_tokens - req.num_computed_tokens, budget)
"""),
]
