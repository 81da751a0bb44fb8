"""Lets later requests overtake the head of the queue.

caught by: a request that does not fit waits at the head of the queue; nobody overtakes it
hint: nobody behind it may join
"""
REPLACE = [
    ("""\
    while waiting and len(running) < max_num_seqs:
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
""",
     """\
    for req in list(waiting):
        if len(running) >= max_num_seqs:
            break
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            continue
        waiting.remove(req)
"""),
]
