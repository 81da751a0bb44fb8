"""Drops the matched tokens from the caller's key list (del key[:n]) instead of from its own copy.

caught by: a whole node matches; the path is stamped with now
hint: match_prefix changed key, which it only reads
pattern: changes an input it only reads
"""
REPLACE = [
    ("    key = list(key)\n", ""),
    ("        key = key[n:]\n", "        del key[:n]\n"),
]
