"""Adds a parent left without children with leaves.append(parent) instead of heapq.heappush, so the list is no longer a heap.

caught by: asking for more than the tree holds empties it, root kept
hint: evict in LRU order
"""
REPLACE = [
    ("""\
            heapq.heappush(leaves, parent)
""",
     """\
            leaves.append(parent)
"""),
]
