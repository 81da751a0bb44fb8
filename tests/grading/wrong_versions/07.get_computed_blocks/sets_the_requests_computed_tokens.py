"""Records the hit on the request (request.num_computed_tokens = ...), the scheduler's job once it admits the request.

caught by: random cases against the reference, whole state compared
hint: lookup only: leave the request as it is
pattern: changes an input it only reads
engine: the engine hands the lookup a view of the request (block_hashes, num_tokens), so the count set on it never reaches the scheduler's request; check() hands it the request itself
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    request.num_computed_tokens = len(blocks) * block_size\n    return blocks, len(blocks) * block_size'),
]
