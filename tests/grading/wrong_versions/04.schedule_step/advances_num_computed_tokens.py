"""Advances num_computed_tokens itself (the engine does that after the step).

caught by: three requests arriving together: prefill, then decode one token per step
hint: the step changed num_computed_tokens, which it only reads
pattern: changes an input it only reads
"""
REPLACE = [
    ("""\
            scheduled[req.request_id] = n
""",
     """\
            scheduled[req.request_id] = n
            req.num_computed_tokens += n
"""),
]
