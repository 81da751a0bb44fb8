"""Priority: preempts the most important request.

caught by: priority: the largest priority value (least important) is preempted
hint: a LARGER priority value means LESS important
hint: preempt the largest (priority, arrival_time)
"""
REPLACE = [
    ('return max(running',
     'return min(running'),
]
