"""Loops over a copy of running (for req in list(running)), so a request preempted earlier in the
step is still visited, allocated again and scheduled.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: must not be visited again
"""
REPLACE = [
    ("""\
    i = 0
    while i < len(running):
        req = running[i]
        n = req.num_tokens - req.num_computed_tokens
        if n <= 0:
            i += 1
            continue
""",
     """\
    for req in list(running):
        n = req.num_tokens - req.num_computed_tokens
        if n <= 0:
            continue
"""),
    ("""\
        scheduled[req.request_id] = n
        i = running.index(req) + 1
""",
     """\
        scheduled[req.request_id] = n
"""),
]
