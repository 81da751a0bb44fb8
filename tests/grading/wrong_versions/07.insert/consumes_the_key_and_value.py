"""Drops the cached tokens from the caller's key and value lists (del key[:n]) instead of its own copies.

caught by: a key already cached: existing slots are kept, its length is returned
hint: insert changed key, which it only reads
pattern: changes an input it only reads
"""
REPLACE = [
    ("    key, value = list(key), list(value)\n", ""),
    ("        key, value = key[n:], value[n:]\n", "        del key[:n]\n        del value[:n]\n"),
]
