"""Puts a request preempted for recompute at the back of waiting (append), behind newer requests.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: goes back to the FRONT of waiting
"""
REPLACE = [
    ('waiting.appendleft(victim)',
     'waiting.append(victim)'),
]
