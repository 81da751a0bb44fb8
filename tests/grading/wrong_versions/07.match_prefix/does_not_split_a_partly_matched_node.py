"""Does not split a partly matched node.

caught by: a match that ends inside a node splits it
hint: split the node the match ends in
"""
REPLACE = [
    ('            node = split_node(child, n)\n            value += node.value\n',
     '            value += child.value[:n]\n            node = child\n'),
]
