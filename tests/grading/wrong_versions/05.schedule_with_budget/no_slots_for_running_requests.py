"""Schedules the running requests' chunks but never reserves their KV slots (no allocate_slots).

caught by: a long prompt is split into chunks by the token budget
hint: running ones included
"""
REPLACE = [
    ("""\
        kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
        budget -= n
    while""",
     """\
        scheduled[req.request_id] = n
        budget -= n
    while"""),
]
