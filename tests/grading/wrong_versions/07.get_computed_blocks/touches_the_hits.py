"""Claims the hits during the lookup (block_pool.touch), as allocate_slots would.

caught by: a cached prefix hits whole blocks; the request's partial last block is computed
hint: lookup only: do not touch the hits
pattern: changes an input it only reads
"""
REPLACE = [
    ('    return blocks, len(blocks) * block_size',
     '    block_pool.touch(blocks)\n    return blocks, len(blocks) * block_size'),
]
