"""Priority: ignores the arrival time among equals.

caught by: priority: among equal priorities, the later arrival is preempted
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: r.priority'),
]
