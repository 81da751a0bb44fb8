"""Returns (empty, root) at once for an empty key, before stamping the root with now.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ("""\
    node = root
    node.last_access_time = now
""",
     """\
    if not key:
        return [], root
    node = root
    node.last_access_time = now
"""),
]
