"""Creates the new leaf with last_access_time 0 instead of now.

caught by: into an empty tree: one leaf
hint: stamp last_access_time = now
"""
REPLACE = [
    ('TreeNode(key, value, node, now)',
     'TreeNode(key, value, node, 0)'),
]
