"""Pops with heapq.heappop from the leaves in the order it found them, never heapified.

caught by: the least recently used leaf goes first
hint: smallest (last_access_time, id) first
"""
REPLACE = [
    ("""\
    heapq.heapify(leaves)
""", ""),
]
