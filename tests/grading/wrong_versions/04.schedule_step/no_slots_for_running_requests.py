"""Schedules the running requests' tokens but never reserves their KV slots (no allocate_slots).

caught by: three requests arriving together: prefill, then decode one token per step
hint: running ones included
"""
REPLACE = [
    ("""\
            kv_cache_manager.allocate_slots(req, n)
            scheduled[req.request_id] = n
""",
     """\
            scheduled[req.request_id] = n
"""),
]
