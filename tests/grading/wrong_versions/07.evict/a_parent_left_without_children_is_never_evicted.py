"""A parent left without children is never evicted.

caught by: asking for more than the tree holds empties it, root kept
"""
REPLACE = [
    ('            heapq.heappush(leaves, parent)\n',
     '            pass\n'),
]
