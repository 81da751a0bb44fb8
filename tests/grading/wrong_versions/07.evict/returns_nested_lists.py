"""Appends each evicted node's value list to the result (freed.append(x.value)): a list of lists.

caught by: the least recently used leaf goes first
hint: the contract of evict
hint: evict returned a list holding a list
not hint: evict in LRU order
pattern: returns another container or number type
"""
REPLACE = [
    ("        freed += x.value\n", "        freed.append(x.value)\n"),
]
