"""Takes lock_ref for a flag (locked when lock_ref == 1), so a node two running requests share (lock_ref 2) is evicted.

caught by: random cases against the reference, whole state compared
hint: although it is locked
engine: no eviction of the engine's radix settings meets a node two running requests hold (lock_ref 2) while the pool is short (check() builds one)
"""
REPLACE = [
    ('elif node is not root and node.lock_ref == 0:',
     'elif node is not root and node.lock_ref != 1:'),
    (' and parent.lock_ref == 0:',
     ' and parent.lock_ref != 1:'),
]
