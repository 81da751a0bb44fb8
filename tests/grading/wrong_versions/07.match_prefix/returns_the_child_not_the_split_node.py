"""Splits the partly matched node but returns the child below the split as last_node.

caught by: a match that ends inside a node splits it
hint: split the node the match ends in
"""
REPLACE = [
    ('            node = split_node(child, n)\n            value += node.value\n',
     '            node = split_node(child, n)\n            value += node.value\n            node = child\n'),
]
