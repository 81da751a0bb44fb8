"""Adds a swapped-in request to running only when allocate_slots succeeds: one that got its blocks back but no room to grow is in neither running nor swapped.

caught by: random cases against the reference, whole state compared
hint: is in neither `running` nor `swapped`
engine: no swap in these settings' steps fits its blocks but not the next token: nobody is dropped; check() builds that pool
"""
REPLACE = [
    ("""\
        kv_cache_manager.swap_in([req])
        running.append(req)
        n = req.num_tokens - req.num_computed_tokens
        if n > 0 and kv_cache_manager.allocate_slots(req, n) is not None:
            scheduled[req.request_id] = n
""",
     """\
        kv_cache_manager.swap_in([req])
        n = req.num_tokens - req.num_computed_tokens
        if n > 0 and kv_cache_manager.allocate_slots(req, n) is not None:
            running.append(req)
            scheduled[req.request_id] = n
"""),
]
