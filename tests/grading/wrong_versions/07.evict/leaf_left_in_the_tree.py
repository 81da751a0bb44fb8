"""Frees the leaf's slots but leaves the node in its parent's children.

caught by: the least recently used leaf goes first
hint: delete it from its parent's children
"""
REPLACE = [
    ("""\
        del parent.children[x.key[0]]
""",
     ''),
]
