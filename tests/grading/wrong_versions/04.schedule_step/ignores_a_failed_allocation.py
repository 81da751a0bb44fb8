"""Admits the head of the queue even when allocate_slots returns None (the pool is full).

caught by: a request that does not fit waits at the head of the queue; nobody overtakes it
hint: nobody behind it may join
"""
REPLACE = [
    ("""\
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
""",
     """\
        kv_cache_manager.allocate_slots(req, n)
"""),
]
