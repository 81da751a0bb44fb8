"""Splits the partly matched node correctly but returns the node above it (the one it walked from) as last_node.

caught by: a match that ends inside a node splits it
hint: not its parent
not hint: split the node the match ends in
"""
REPLACE = [
    ("""\
            node = split_node(child, n)
            value += node.value
            break
""",
     """\
            value += split_node(child, n).value
            break
"""),
]
