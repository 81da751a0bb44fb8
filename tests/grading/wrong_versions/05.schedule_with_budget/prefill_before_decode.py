"""Schedules waiting prefills before the running decodes: the prompt chunks eat the budget and decodes starve.

caught by: decodes first, then prefill chunks with what is left of the budget
hint: already running and got nothing
not hint: chunk
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
""",
     """\
    old_running = list(running)
"""),
    ("""\
        budget -= n
    return scheduled""",
     """\
        budget -= n
    for req in old_running:
        if budget <= 0:
            break
        n = chunk(req)
        if n <= 0:
            continue
        kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
        budget -= n
    return scheduled"""),
]
