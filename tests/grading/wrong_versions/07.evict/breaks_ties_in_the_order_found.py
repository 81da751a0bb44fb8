"""Breaks ties between leaves of the same last_access_time in the order it found them (a counter, as in the heapq docs' recipe), not oldest node (smallest id) first.

caught by: a parent left without children becomes a leaf and can go too
hint: evict in LRU order
"""
REPLACE = [
    ("""\
    leaves, stack = [], [root]
""",
     """\
    import itertools
    order = itertools.count()
    leaves, stack = [], [root]
"""),
    ("""\
            leaves.append(node)
""",
     """\
            leaves.append((node.last_access_time, next(order), node))
"""),
    ("""\
        x = heapq.heappop(leaves)
""",
     """\
        x = heapq.heappop(leaves)[2]
"""),
    ("""\
            heapq.heappush(leaves, parent)
""",
     """\
            heapq.heappush(leaves, (parent.last_access_time, next(order), parent))
"""),
]
