"""Returns [value, last_node], a list, where the engine expects the pair as a tuple.

caught by: random cases against the reference, whole state compared
hint: match_prefix returns a tuple (value, last_node)
pattern: returns another container or number type
"""
REPLACE = [
    ("    return value, node\n", "    return [value, node]\n"),
]
