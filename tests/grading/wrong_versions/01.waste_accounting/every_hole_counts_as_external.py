"""Every hole counts as external.

caught by: holes: external only when too small for the next request
hint: a hole is external fragmentation only if it is too small
"""
REPLACE = [
    ('acc["external" if h < need else "free"] += h',
     'acc["external"] += h'),
]
