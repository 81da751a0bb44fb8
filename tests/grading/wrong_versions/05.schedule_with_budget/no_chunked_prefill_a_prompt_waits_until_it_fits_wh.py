"""No chunked prefill: a prompt waits until it fits whole.

caught by: a long prompt is split into chunks by the token budget
hint: chunked prefill
"""
REPLACE = [
    ("""\
        req = waiting[0]
        n = chunk(req)
""",
     """\
        req = waiting[0]
        n = chunk(req)
        if n < req.num_tokens - req.num_computed_tokens and long_prefill_token_threshold == 0:
            break
"""),
]
