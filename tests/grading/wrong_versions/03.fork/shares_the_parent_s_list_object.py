"""Shares the parent's list object.

caught by: fork shares every block and allocates nothing
hint: copy the list
"""
REPLACE = [
    ('list(parent.block_table)',
     'parent.block_table'),
]
