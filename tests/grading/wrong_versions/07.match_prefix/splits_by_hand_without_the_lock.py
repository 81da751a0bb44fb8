"""Splits the node by hand instead of with split_node and forgets to copy lock_ref to the new upper node.

caught by: random cases against the reference, whole state compared
hint: which copies lock_ref
engine: in the engine's radix settings no lookup ends inside a locked node (check() builds one)
"""
REPLACE = [
    ("""\
            node = split_node(child, n)
""",
     """\
            node = TreeNode(child.key[:n], child.value[:n], child.parent, child.last_access_time)
            child.parent.children[child.key[0]] = node
            child.key, child.value = child.key[n:], child.value[n:]
            child.parent = node
            node.children[child.key[0]] = child
"""),
]
