"""Counts only nodes matched whole as already cached: a partial match of a node adds 0.

caught by: a key already cached: existing slots are kept, its length is returned
hint: count the leading tokens
"""
REPLACE = [
    ("""\
        total += n
""",
     """\
        total += n if n == len(child.key) else 0
"""),
]
