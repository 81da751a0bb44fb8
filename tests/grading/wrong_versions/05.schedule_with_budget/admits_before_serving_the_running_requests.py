"""Reserves the slots of the waiting requests it admits before those of the running requests (the dict still lists the running ones first): a short pool goes to the newcomers.

caught by: random cases against the reference, whole state compared
hint: reserve every running request's slots (allocate_slots) before admitting anyone
engine: in these settings the pool never runs short for a running request while a newcomer fits, so the slots and the schedule are the same; check() builds that pool
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
        budget -= n
    while waiting and budget > 0 and len(running) < max_num_seqs:
        req = waiting[0]
        n = chunk(req)
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
        running.append(req)
        scheduled[req.request_id] = n
        budget -= n
    return scheduled
""",
     """\
    plan = []
    for req in running:
        if budget <= 0:
            break
        n = chunk(req)
        if n <= 0:
            continue
        plan.append((req, n))
        budget -= n
    admitted = []
    while waiting and budget > 0 and len(running) + len(admitted) < max_num_seqs:
        req = waiting[0]
        n = chunk(req)
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        admitted.append((waiting.popleft(), n))
        budget -= n
    for req, n in plan:
        kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
    for req, n in admitted:
        running.append(req)
        scheduled[req.request_id] = n
    return scheduled
"""),
]
