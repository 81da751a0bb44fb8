"""Builds the new leaf as SGLang does (leaf.key = key; leaf.value = value) on the caller's own lists, not copies: when nothing was cached the tree holds the very lists the caller keeps using.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ("    key, value = list(key), list(value)\n", ""),
    ("""\
        node.children[key[0]] = TreeNode(key, value, node, now)
""",
     """\
        leaf = TreeNode(parent=node, now=now)
        leaf.key, leaf.value = key, value
        node.children[key[0]] = leaf
"""),
]
