"""Pops the head of the queue before allocating and, when allocate_slots fails, puts it back at the END of waiting (append), so the next request becomes the head.

caught by: a request that does not fit waits at the head of the queue; nobody overtakes it
"""
REPLACE = [
    ("""\
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
""",
     """\
        req = waiting.popleft()
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            waiting.append(req)
            break
"""),
]
