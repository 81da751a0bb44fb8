"""Skips a waiting request the pool cannot hold and admits the ones behind it (overtaking).

caught by: a full pool stops admission: the head of the queue waits and nobody overtakes it
hint: the pool is full - stop
"""
REPLACE = [
    ('    while waiting and budget > 0 and len(running) < max_num_seqs:\n        req = waiting[0]\n        n = chunk(req)\n        if kv_cache_manager.allocate_slots(req, n) is None:\n            break\n        waiting.popleft()\n',
     '    for req in list(waiting):\n        if budget <= 0 or len(running) >= max_num_seqs:\n            break\n        n = chunk(req)\n        if kv_cache_manager.allocate_slots(req, n) is None:\n            continue\n        waiting.remove(req)\n'),
]
