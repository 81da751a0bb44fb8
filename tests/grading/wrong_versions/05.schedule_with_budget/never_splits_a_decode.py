"""Never splits a running request's decode tokens: a running request past its prompt that misses more tokens than the budget left is skipped instead of getting the chunk that fits.

caught by: random cases against the reference, whole state compared
hint: a running request gets the part that fits
engine: a decode misses one token a step in this engine, and a step with budget left gives it that token: nothing to split
"""
REPLACE = [
    ("""\
        n = chunk(req)
        if n <= 0:
            continue
        kv_cache_manager.allocate_slots(req, n)
""",
     """\
        n = chunk(req)
        if n <= 0:
            continue
        if req.num_computed_tokens >= req.num_prompt_tokens and n < req.num_tokens - req.num_computed_tokens:
            continue
        kv_cache_manager.allocate_slots(req, n)
"""),
]
