"""Charges the budget with the request's whole missing count instead of the chunk it scheduled.

caught by: a random workload, step by step
hint: the budget was charged for all of them
not hint: the budget shrinks by that much
"""
REPLACE = [
    ("""\
        kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
        budget -= n
""",
     """\
        kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
        budget -= req.num_tokens - req.num_computed_tokens
"""),
]
