"""priority: breaks ties of (priority, arrival_time) by request_id (the largest id string), not by the running order.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: (r.priority, r.arrival_time, r.request_id)'),
]
