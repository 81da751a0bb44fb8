"""Keeps walking the running requests after the budget is used up and lists each of them with 0 tokens.

caught by: random cases against the reference, whole state compared
hint: is listed with 0 tokens
engine: the engine skips a 0-token entry (nothing to compute): the tokens are the same; check() compares the returned dict
"""
REPLACE = [
    ("""\
    for req in running:
        if budget <= 0:
            break
        n = chunk(req)
        if n <= 0:
            continue
        kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
""",
     """\
    for req in running:
        n = max(chunk(req), 0)
        if n > 0:
            kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
"""),
]
