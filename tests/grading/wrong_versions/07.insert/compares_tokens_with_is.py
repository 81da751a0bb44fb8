"""Compares tokens with `is` instead of `==` (true only for the small ints Python caches).

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ("child.key[n] == key[n]", "child.key[n] is key[n]"),
]
