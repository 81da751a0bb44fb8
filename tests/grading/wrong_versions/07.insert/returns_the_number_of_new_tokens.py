"""Returns the number of new tokens.

caught by: into an empty tree: one leaf
hint: count the leading tokens
"""
REPLACE = [
    ("""\
    return total
""",
     """\
    return len(key)
"""),
]
