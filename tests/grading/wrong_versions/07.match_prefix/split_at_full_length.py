"""Splits the child even when the whole child matched (splits at len(child.key)).

caught by: a whole node matches; the path is stamped with now
hint: split_node: need 0 < n < 3, got 3
"""
REPLACE = [
    ("""\
        if n < len(child.key):
""",
     """\
        if n < len(child.key) or n == len(key):
"""),
]
