"""Pops with heapq.heappop from the leaves in the order it found them, never heapified.

caught by: the least recently used leaf goes first
hint: evict in LRU order
"""
REPLACE = [
    ("""\
    heapq.heapify(leaves)
""", ""),
]
