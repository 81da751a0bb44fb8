"""Lets later requests overtake the head of the queue.

caught by: a request that does not fit waits at the head of the queue; nobody overtakes it
hint: nobody behind it may join
"""
REPLACE = [
    ('    while waiting and len(running) < max_num_seqs:\n        req = waiting[0]\n        n = req.num_tokens - req.num_computed_tokens\n        if kv_cache_manager.allocate_slots(req, n) is None:\n            break\n        waiting.popleft()\n',
     '    for req in list(waiting):\n        if len(running) >= max_num_seqs:\n            break\n        n = req.num_tokens - req.num_computed_tokens\n        if kv_cache_manager.allocate_slots(req, n) is None:\n            continue\n        waiting.remove(req)\n'),
]
