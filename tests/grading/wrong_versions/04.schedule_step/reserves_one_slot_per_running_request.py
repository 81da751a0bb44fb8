"""Reserves one KV slot per running request (allocate_slots(req, 1)) but schedules all its missing tokens.

caught by: running requests several tokens behind (3 tokens per step, as with speculative decoding): each gets all
hint: running ones included
"""
REPLACE = [
    ("""\
        if n > 0:
            kv_cache_manager.allocate_slots(req, n)
""",
     """\
        if n > 0:
            kv_cache_manager.allocate_slots(req, 1)
"""),
]
