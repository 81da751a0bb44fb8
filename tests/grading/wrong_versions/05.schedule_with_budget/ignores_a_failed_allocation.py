"""Admits the head of the queue even when allocate_slots returns None (the pool is full).

caught by: a full pool stops admission: the head of the queue waits and nobody overtakes it
hint: the pool is full - stop
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
