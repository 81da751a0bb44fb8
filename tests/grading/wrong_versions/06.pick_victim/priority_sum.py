"""priority: adds priority and arrival_time (priority + arrival_time) instead of comparing the pair.

caught by: random cases against the reference, whole state compared
hint: compare the pair (priority, arrival_time)
engine: another victim is a different schedule within every contract the engine checks (recompute gives the same tokens): check() compares the victim
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: r.priority + r.arrival_time'),
]
