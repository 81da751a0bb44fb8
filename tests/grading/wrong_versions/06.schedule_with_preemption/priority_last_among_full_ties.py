"""priority: takes the last of the running requests sorted by (priority, arrival_time): among full ties it preempts the one admitted last, not the first max() finds.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ('victim = max(running, key=lambda r: (r.priority, r.arrival_time))',
     'victim = sorted(running, key=lambda r: (r.priority, r.arrival_time))[-1]'),
]
