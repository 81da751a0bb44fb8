"""fcfs: preempts the first running request (the oldest) instead of the end of the list.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: fcfs: preempt the END of the running list
"""
REPLACE = [
    ('victim = running[-1]',
     'victim = running[0]'),
]
