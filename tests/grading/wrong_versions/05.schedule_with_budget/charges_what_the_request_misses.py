"""Charges the budget with the request's whole missing count instead of the chunk it scheduled.

caught by: a random workload, step by step
hint: the budget was charged for all of them
not hint: the budget shrinks by that much
engine: it schedules fewer tokens a step, never more than the budget: a slower schedule within every contract the engine checks; check() compares the schedule
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
