"""Leaves the retry loop when the request preempted itself, but still schedules it.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: when the victim is the request you are allocating for, stop
"""
REPLACE = [
    ("""\
        if req not in running:
            break
        scheduled[req.request_id] = n
        i = running.index(req) + 1
""",
     """\
        scheduled[req.request_id] = n
        if req not in running:
            break
        i = running.index(req) + 1
"""),
]
