"""Most recently used first.

caught by: the least recently used leaf goes first
hint: smallest (last_access_time, id) first
"""
REPLACE = [
    ("""\
    heapq.heapify(leaves)
""",
     """\
    leaves.sort(reverse=True)
"""),
    ("""\
        x = heapq.heappop(leaves)
""",
     """\
        x = leaves.pop(0)
"""),
    ("""\
            heapq.heappush(leaves, parent)
""",
     """\
            leaves.append(parent)
"""),
]
