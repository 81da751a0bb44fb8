"""priority: compares whole seconds of arrival (int(arrival_time)), so requests arriving within the same second tie and the first of them is preempted.

caught by: priority: among equal priorities, the later arrival is preempted
hint: among equal priorities
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: (r.priority, int(r.arrival_time))'),
]
