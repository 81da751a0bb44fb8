"""priority: compares arrival times to the millisecond (round(arrival_time, 3)), so requests arriving within the same millisecond tie and the first of them is preempted.

caught by: random cases against the reference, whole state compared
hint: among equal priorities
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: (r.priority, round(r.arrival_time, 3))'),
]
