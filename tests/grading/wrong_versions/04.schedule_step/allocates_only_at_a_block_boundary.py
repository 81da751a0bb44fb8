"""Calls allocate_slots for a running request only when its first missing token starts a new block (num_computed_tokens % block_size == 0), assuming the tokens fit the last block otherwise.

caught by: running requests several tokens behind (3 tokens per step, as with speculative decoding): each gets all
hint: running ones included
engine: a running request misses one token a step in this engine (no speculative decoding): it needs a new block exactly when its computed tokens fill their last one, so it holds the same blocks
"""
REPLACE = [
    ("""\
        if n > 0:
            kv_cache_manager.allocate_slots(req, n)
            scheduled[req.request_id] = n
""",
     """\
        if n > 0:
            if req.num_computed_tokens % kv_cache_manager.block_size == 0:
                kv_cache_manager.allocate_slots(req, n)
            scheduled[req.request_id] = n
"""),
]
