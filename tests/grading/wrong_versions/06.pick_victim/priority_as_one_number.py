"""priority: folds (priority, arrival_time) into one number, priority * 1000 + arrival_time: wrong once arrival times are time.perf_counter() seconds (thousands).

caught by: random cases against the reference, whole state compared
hint: preempt the largest (priority, arrival_time)
hint: a LARGER priority value means LESS important
engine: the engine's arrival times are seconds apart at most in these settings, which 1000 per priority level outweighs: the same victims
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: r.priority * 1000 + r.arrival_time'),
]
