"""Preempts at most one victim per step: when a second allocation fails it stops preempting and schedules the request anyway.

caught by: swap: the victim moves to the CPU pool and comes back before any waiting request
hint: you stopped preempting after
pattern: two victims in one step
"""
REPLACE = [
    ("""\
        while kv_cache_manager.allocate_slots(req, n) is None:
            if policy == "priority":
""",
     """\
        while kv_cache_manager.allocate_slots(req, n) is None:
            if preempted:
                break
            if policy == "priority":
"""),
]
