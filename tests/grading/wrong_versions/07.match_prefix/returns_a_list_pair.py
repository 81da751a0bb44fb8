"""Returns [value, last_node], a list, where the engine reads a tuple (value, last_node).

caught by: an empty tree matches nothing and returns the root
hint: the contract of match_prefix: a tuple (value, last_node)
pattern: returns another container or number type
"""
REPLACE = [
    ('    return value, node', '    return [value, node]'),
]
