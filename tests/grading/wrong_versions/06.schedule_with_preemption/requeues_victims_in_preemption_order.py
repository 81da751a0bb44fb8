"""Collects the recompute victims and puts them back at the front of waiting at the end of the step, in the order they were preempted (the newest first), instead of each at the front as it is preempted.

caught by: two requests cannot grow in one step: two victims, both listed and re-queued at the front
hint: put each at the FRONT of waiting as you preempt it
pattern: two victims in one step
"""
REPLACE = [
    ("""\
    scheduled, preempted = {}, []
""",
     """\
    scheduled, preempted = {}, []
    requeue = []
"""),
    ("""\
                waiting.appendleft(victim)
""",
     """\
                requeue.append(victim)
"""),
    ("""\
        if req not in running:
            break
        scheduled[req.request_id] = n
        i = running.index(req) + 1
""",
     """\
        if req not in running:
            break
        scheduled[req.request_id] = n
        i = running.index(req) + 1
    waiting.extendleft(reversed(requeue))
"""),
]
