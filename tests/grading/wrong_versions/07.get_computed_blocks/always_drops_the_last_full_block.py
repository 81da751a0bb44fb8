"""Always leaves the last full block out (num_tokens // block_size - 1), even when the prompt ends in a partial block.

caught by: a cached prefix hits whole blocks; the request's partial last block is computed
hint: every block up to the first miss hits
"""
REPLACE = [
    ('max_blocks = (request.num_tokens - 1) // block_size',
     'max_blocks = request.num_tokens // block_size - 1'),
]
