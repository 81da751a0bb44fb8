"""Sizes a waiting request's chunk from its prompt (num_prompt_tokens), not from what it misses: a request preempted for recompute comes back with its generated tokens too.

caught by: random cases against the reference, whole state compared
hint: was preempted earlier and waits with its generated tokens
engine: lab 05's engine settings preempt nobody, so a waiting request has no output tokens and its prompt is all it misses
"""
REPLACE = [
    ("""\
    def chunk(req):
        n = req.num_tokens - req.num_computed_tokens
""",
     """\
    def chunk(req):
        if req in waiting:
            n = req.num_prompt_tokens - req.num_computed_tokens
        else:
            n = req.num_tokens - req.num_computed_tokens
"""),
]
