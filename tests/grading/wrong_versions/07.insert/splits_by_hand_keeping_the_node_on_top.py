"""Splits by hand the other way round: the node keeps the cached part and a new node below it takes the rest (a running request holding the node now holds only its head).

caught by: random cases against the reference, whole state compared
hint: puts a NEW node above the split point
engine: in the engine's radix settings no insert splits a node a running request holds, nor does an LRU tie between the halves decide an eviction (check() builds both)
"""
REPLACE = [
    ("""\
        node = split_node(child, n) if n < len(child.key) else child
""",
     """\
        if n < len(child.key):
            rest = TreeNode(child.key[n:], child.value[n:], child, now)
            rest.lock_ref = child.lock_ref
            rest.children = child.children
            for c in rest.children.values():
                c.parent = rest
            child.key, child.value = child.key[:n], child.value[:n]
            child.children = {rest.key[0]: rest}
        node = child
"""),
]
