"""Reserves the head request's slots first and checks max_num_seqs afterwards: the blocks of a request that is not admitted leak.

caught by: max_num_seqs caps the batch; a finished request's place is refilled
hint: a request left waiting must hold no blocks
"""
REPLACE = [
    ('    while waiting and len(running) < max_num_seqs:\n        req = waiting[0]\n        n = req.num_tokens - req.num_computed_tokens\n        if kv_cache_manager.allocate_slots(req, n) is None:\n            break\n',
     '    while waiting:\n        req = waiting[0]\n        n = req.num_tokens - req.num_computed_tokens\n        if kv_cache_manager.allocate_slots(req, n) is None:\n            break\n        if len(running) >= max_num_seqs:\n            break\n'),
]
