"""Off by one: a hole exactly the size of the next request counts as external.

caught by: a hole exactly the size of the next request is free, one slot smaller is external
"""
REPLACE = [
    ('acc["external" if h < need else "free"] += h',
     'acc["external" if h <= need else "free"] += h'),
]
