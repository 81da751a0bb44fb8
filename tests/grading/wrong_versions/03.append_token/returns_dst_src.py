"""Returns the copy as (new, old) instead of (src, dst).

caught by: a shared last block is copied before the write; its last owner then writes in place
"""
REPLACE = [
    ('            copy = (last, new)\n',
     '            copy = (new, last)\n'),
]
