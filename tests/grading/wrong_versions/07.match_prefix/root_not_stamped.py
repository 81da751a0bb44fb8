"""Forgets to stamp the root with now.

caught by: an empty tree matches nothing and returns the root
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
]
