"""Forgets the reference counts.

caught by: fork shares every block and allocates nothing
hint: a holder never took its reference
"""
REPLACE = [
    ('        pool.incref(block_id)',
     '        pass'),
]
