"""Overwrites the slots of cached tokens.

caught by: a key already cached: existing slots are kept, its length is returned
hint: keep the slots they have
"""
REPLACE = [
    ("""\
        key, value = key[n:], value[n:]
        node = split_node(child, n) if n < len(child.key) else child
""",
     """\
        if n == len(child.key):
            child.value = value[:n]
        key, value = key[n:], value[n:]
        node = split_node(child, n) if n < len(child.key) else child
"""),
]
