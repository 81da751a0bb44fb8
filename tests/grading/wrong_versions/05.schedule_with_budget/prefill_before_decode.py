"""Schedules waiting prefills before the running decodes: the prompt chunks eat the budget and decodes starve.

caught by: a budget used up exactly: nobody else joins in that step
hint: (their decodes) first, in the order of `running`
not hint: chunk
pattern: running requests walked out of order
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
