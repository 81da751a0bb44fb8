"""priority: adds priority and arrival_time (priority + arrival_time) instead of comparing the pair.

caught by: random cases against the reference, whole state compared
hint: preempt the largest (priority, arrival_time)
hint: a LARGER priority value means LESS important
engine: another victim is a different schedule within every contract the engine checks (recompute gives the same tokens): check() compares the victim
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: r.priority + r.arrival_time'),
]
