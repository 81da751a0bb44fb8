"""Returns the freed slots as a tuple where the engine reads a list.

caught by: the least recently used leaf goes first
hint: the contract of evict
hint: evict returned a tuple, not a list
pattern: returns another container or number type
"""
REPLACE = [
    ('    return freed', '    return tuple(freed)'),
]
