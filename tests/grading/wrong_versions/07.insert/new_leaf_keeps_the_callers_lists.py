"""Builds the new leaf as SGLang does (leaf.key = key; leaf.value = value) on the caller's own lists, not copies: when nothing was cached the tree holds the very lists the caller keeps using.

caught by: random cases against the reference, whole state compared
hint: the tree keeps its own lists
engine: the engine's radix slot builds fresh key and value lists for every insert and never touches them again, so the shared lists do no harm there (a caller that reuses its lists, as check() shows, is hurt)
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
