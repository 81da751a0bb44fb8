"""Preempts once when allocate_slots fails, then schedules the request without trying to allocate again.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: retry until it succeeds
not hint: recompute: kv_cache_manager.free(victim)
"""
REPLACE = [
    ("        while kv_cache_manager.allocate_slots(req, n) is None:\n",
     "        if kv_cache_manager.allocate_slots(req, n) is None:\n"),
]
