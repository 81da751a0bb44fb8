"""Splits the node by hand instead of with split_node and forgets to copy lock_ref to the new upper node.

caught by: random cases against the reference, whole state compared
hint: which copies lock_ref
engine: in the engine's radix settings no insert splits a locked node: each request's own lookup split the path first (check() builds an insert into a locked node)
"""
REPLACE = [
    ("""\
        node = split_node(child, n) if n < len(child.key) else child
""",
     """\
        if n < len(child.key):
            node = TreeNode(child.key[:n], child.value[:n], child.parent, now)
            child.parent.children[child.key[0]] = node
            child.key, child.value = child.key[n:], child.value[n:]
            child.parent = node
            node.children[child.key[0]] = child
        else:
            node = child
"""),
]
