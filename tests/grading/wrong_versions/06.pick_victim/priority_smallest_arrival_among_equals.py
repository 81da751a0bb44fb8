"""priority: among equal priorities preempts the EARLIER arrival (min arrival_time).

caught by: priority: among equal priorities, the later arrival is preempted
hint: among equal priorities
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: (r.priority, -r.arrival_time)'),
]
