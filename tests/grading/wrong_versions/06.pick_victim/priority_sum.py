"""priority: adds priority and arrival_time (priority + arrival_time) instead of comparing the pair.

caught by: random cases against the reference, whole state compared
hint: compare the pair (priority, arrival_time)
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: r.priority + r.arrival_time'),
]
