"""Breaks ties between leaves of the same last_access_time in the order it found them (a counter, as in the heapq docs' recipe), not oldest node (smallest id) first.

caught by: a parent left without children becomes a leaf and can go too
hint: smallest (last_access_time, id) first
engine: no eviction of the engine's radix settings has two candidate leaves stamped at the same time (a split's two halves) where the order between them decides what goes (check() builds one)
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
