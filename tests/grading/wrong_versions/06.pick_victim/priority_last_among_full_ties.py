"""priority: sorts a copy and takes its last item, so among requests with the same (priority, arrival_time) it preempts the one admitted last, not the first max() finds.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ('return max(running, key=lambda r: (r.priority, r.arrival_time))',
     'return sorted(running, key=lambda r: (r.priority, r.arrival_time))[-1]'),
]
