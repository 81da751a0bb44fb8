"""Always adds a new leaf after the walk, even when the whole key was already cached (nothing is left to add).

caught by: a key already cached: existing slots are kept, its length is returned
hint: IndexError
"""
REPLACE = [
    ("""\
    if key:
        node.children[key[0]] = TreeNode(key, value, node, now)
""",
     """\
    node.children[key[0]] = TreeNode(key, value, node, now)
"""),
]
