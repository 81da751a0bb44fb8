"""Records the hit on the request (request.num_computed_tokens = ...), the scheduler's job once it admits the request.

caught by: random cases against the reference, whole state compared
pattern: changes an input it only reads
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    request.num_computed_tokens = len(blocks) * block_size\n    return blocks, len(blocks) * block_size'),
]
