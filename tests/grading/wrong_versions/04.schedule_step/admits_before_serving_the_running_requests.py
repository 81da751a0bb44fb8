"""Admits the waiting requests before reserving the running requests' slots: a short pool goes to the newcomers and a running request is left without its KV slots.

caught by: random cases against the reference, whole state compared
hint: reserve every running request's slots (allocate_slots) before admitting anyone
engine: in these settings the pool never runs short for a running request while a newcomer fits, so the slots and the schedule are the same; check() builds that pool
"""
REPLACE = [
    ("""\
    scheduled = {}
    for req in running:
        n = req.num_tokens - req.num_computed_tokens
        if n > 0:
            kv_cache_manager.allocate_slots(req, n)
            scheduled[req.request_id] = n
    while waiting and len(running) < max_num_seqs:
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
        running.append(req)
        scheduled[req.request_id] = n
    return scheduled
""",
     """\
    scheduled = {}
    admitted = []
    while waiting and len(running) + len(admitted) < max_num_seqs:
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        admitted.append(waiting.popleft())
    for req in running:
        n = req.num_tokens - req.num_computed_tokens
        if n > 0:
            kv_cache_manager.allocate_slots(req, n)
            scheduled[req.request_id] = n
    for req in admitted:
        running.append(req)
        scheduled[req.request_id] = req.num_tokens - req.num_computed_tokens
    return scheduled
"""),
]
