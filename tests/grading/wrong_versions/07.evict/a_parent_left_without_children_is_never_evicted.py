"""A parent left without children is never evicted.

caught by: asking for more than the tree holds empties it, root kept
hint: a parent left without children (unlocked, not the root) is a leaf too
"""
REPLACE = [
    ("""\
            heapq.heappush(leaves, parent)
""",
     """\
            pass
"""),
]
