"""Does not split a partly matched node.

caught by: a match that ends inside a node splits it
"""
REPLACE = [
    ('            node = split_node(child, n)\n            value += node.value\n',
     '            value += child.value[:n]\n            node = child\n'),
]
