"""Applies long_prefill_token_threshold even when it is 0 (0 means no limit), so nothing is scheduled.

caught by: a long prompt is split into chunks by the token budget
hint: num_new_tokens must be an int >= 1, got 0
"""
REPLACE = [
    ("""\
        if long_prefill_token_threshold > 0:
            n = min(n, long_prefill_token_threshold)
""",
     """\
        n = min(n, long_prefill_token_threshold)
"""),
]
