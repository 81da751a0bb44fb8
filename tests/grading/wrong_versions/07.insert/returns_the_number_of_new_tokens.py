"""Returns the number of new tokens.

caught by: into an empty tree: one leaf
"""
REPLACE = [
    ('    return total\n',
     '    return len(key)\n'),
]
