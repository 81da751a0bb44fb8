"""Allows every full block to hit, so a fully cached prompt leaves no token to compute.

caught by: never hit the last token: k cached full blocks hit k - 1
hint: never hit the last token
"""
REPLACE = [
    ('max_blocks = (request.num_tokens - 1) // block_size',
     'max_blocks = request.num_tokens // block_size'),
]
