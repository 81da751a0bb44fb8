"""Drops the matched tokens from the caller's key list (del key[:n]) instead of from its own copy.

caught by: a whole node matches; the path is stamped with now
hint: your function changed `key`
pattern: changes an input it only reads
"""
REPLACE = [
    ("    key = list(key)\n", ""),
    ("        key = key[n:]\n", "        del key[:n]\n"),
]
