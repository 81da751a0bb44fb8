"""Reserves one KV slot per running request (allocate_slots(req, 1)) but schedules all its missing tokens.

caught by: running requests several tokens behind (3 tokens per step, as with speculative decoding): each gets all
hint: running ones included
pattern: running requests several tokens behind
engine: a running request misses one token a step in this engine (no speculative decoding, and lab 04's step takes no budget, so no prefill is cut): one slot is all it needs
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
