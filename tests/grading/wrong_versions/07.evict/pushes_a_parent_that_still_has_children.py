"""Pushes the parent onto the heap as soon as one child goes, even when it still has other children.

caught by: a parent left without children becomes a leaf and can go too
hint: still had children
not hint: evict in LRU order
"""
REPLACE = [
    ("        if parent is not root and not parent.children and parent.lock_ref == 0:\n",
     "        if parent is not root and parent.lock_ref == 0 and parent not in leaves:\n"),
]
