"""Stamps last_access_time only on the last node of the match, not on the whole path (ancestors age and get evicted early).

caught by: a whole node matches; the path is stamped with now
hint: stamp last_access_time = now
"""
REPLACE = [
    ("""\
    node.last_access_time = now
    value = []
""",
     """\
    value = []
"""),
    ("""\
        child.last_access_time = now
""",
     ''),
    ("""\
    return value, node
""",
     """\
    node.last_access_time = now
    return value, node
"""),
]
