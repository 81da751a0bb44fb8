"""Off by one: a hole exactly the size of the next request counts as external.

caught by: a hole exactly the size of the next request is free, one slot smaller is external
hint: a hole is external fragmentation only if it is too small
"""
REPLACE = [
    ('acc["external" if h < need else "free"] += h',
     'acc["external" if h <= need else "free"] += h'),
]
