"""Adds a parent left without children with leaves.append(parent) instead of heapq.heappush, so the list is no longer a heap.

caught by: asking for more than the tree holds empties it, root kept
hint: smallest (last_access_time, id) first
engine: no eviction of the engine's radix settings goes on popping after it pushed an emptied parent while other leaves wait, so the broken heap is never read out of order there (check() builds such a tree)
"""
REPLACE = [
    ("""\
            heapq.heappush(leaves, parent)
""",
     """\
            leaves.append(parent)
"""),
]
