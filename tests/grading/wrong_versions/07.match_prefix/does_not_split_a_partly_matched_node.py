"""Does not split a partly matched node.

caught by: a match that ends inside a node splits it
hint: split the node the match ends in
pattern: a prompt shorter than its prefix hit
"""
REPLACE = [
    ("""\
            node = split_node(child, n)
            value += node.value
""",
     """\
            value += child.value[:n]
            node = child
"""),
]
