"""Pops the head of the queue before allocating and, when allocate_slots fails, puts it back at the END of waiting (append), so the next request becomes the head.

caught by: a request that does not fit waits at the head of the queue; nobody overtakes it
engine: a different admission order within every contract the engine checks: each request's tokens are the same; check() compares the queue
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
