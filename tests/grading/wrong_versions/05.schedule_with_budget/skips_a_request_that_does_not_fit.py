"""Skips a waiting request the pool cannot hold and admits the ones behind it (overtaking).

caught by: a full pool stops admission: the head of the queue waits and nobody overtakes it
hint: the pool is full - stop
"""
REPLACE = [
    ("""\
    while waiting and budget > 0 and len(running) < max_num_seqs:
        req = waiting[0]
        n = chunk(req)
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
""",
     """\
    for req in list(waiting):
        if budget <= 0 or len(running) >= max_num_seqs:
            break
        n = chunk(req)
        if kv_cache_manager.allocate_slots(req, n) is None:
            continue
        waiting.remove(req)
"""),
]
