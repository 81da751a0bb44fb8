"""Evicts locked nodes.

caught by: locked nodes (and their ancestors) are never evicted
hint: although it is locked
"""
REPLACE = [
    ('elif node is not root and node.lock_ref == 0:',
     'elif node is not root:'),
    (' and parent.lock_ref == 0:',
     ':'),
]
