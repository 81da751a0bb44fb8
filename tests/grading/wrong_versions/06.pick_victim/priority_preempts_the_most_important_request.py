"""Priority: preempts the most important request.

caught by: priority: the largest priority value (least important) is preempted
"""
REPLACE = [
    ('return max(running',
     'return min(running'),
]
