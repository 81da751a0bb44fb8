"""Admits a waiting request for its prompt (num_prompt_tokens), not for what it misses: a request preempted for recompute comes back with its generated tokens too.

caught by: random cases against the reference, whole state compared
hint: was preempted earlier and waits with its generated tokens
engine: lab 04's engine settings preempt nobody, so a waiting request has no output tokens and its prompt is all it misses
"""
REPLACE = [
    ("""\
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
""",
     """\
        req = waiting[0]
        n = req.num_prompt_tokens
"""),
]
