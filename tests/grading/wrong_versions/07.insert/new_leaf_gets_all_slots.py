"""Gives the new leaf the whole value list instead of only the slots of its own tokens.

caught by: a key that leaves a node in the middle splits it
hint: has 2 tokens but 5 slots
"""
REPLACE = [
    ("""\
        node.children[key[0]] = TreeNode(key, value, node, now)
""",
     """\
        node.children[key[0]] = TreeNode(key, full_value, node, now)
"""),
    ("""\
    key, value = list(key), list(value)
""",
     """\
    key, value = list(key), list(value)
    full_value = value
"""),
]
