"""Forgets the reference counts.

caught by: fork shares every block and allocates nothing
"""
REPLACE = [
    ('        pool.incref(block_id)',
     '        pass'),
]
