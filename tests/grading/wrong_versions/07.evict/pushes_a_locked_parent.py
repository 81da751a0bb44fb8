"""After removing a leaf, pushes its emptied parent onto the heap without checking the parent's lock.

caught by: a locked inner node stays when its children go, and is not evicted after them
hint: although it is locked
"""
REPLACE = [
    (' and parent.lock_ref == 0:',
     ':'),
]
