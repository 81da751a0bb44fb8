"""Reserves the head request's slots first and checks max_num_seqs afterwards: the blocks of a request that is not admitted leak.

caught by: max_num_seqs caps the batch; a finished request's place is refilled
hint: a request left waiting must hold no blocks
pattern: more requests than max_num_seqs
"""
REPLACE = [
    ("""\
    while waiting and len(running) < max_num_seqs:
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
""",
     """\
    while waiting:
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        if len(running) >= max_num_seqs:
            break
"""),
]
