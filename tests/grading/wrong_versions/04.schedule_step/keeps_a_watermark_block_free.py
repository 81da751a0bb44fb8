"""Admits a waiting request only if one block stays free afterwards (allocate_slots(..., watermark_blocks=1), as vLLM's scheduler does next to running requests): a request that exactly fills the pool waits.

caught by: a request that does not fit waits at the head of the queue; nobody overtakes it
hint: it does not wait for the whole batch to finish
engine: a slower schedule within every contract the engine checks (the watermark only delays an admission): the tokens are the same; check() compares the schedule
"""
REPLACE = [
    ("""\
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
""",
     """\
        if kv_cache_manager.allocate_slots(req, n, watermark_blocks=1) is None:
            break
"""),
]
