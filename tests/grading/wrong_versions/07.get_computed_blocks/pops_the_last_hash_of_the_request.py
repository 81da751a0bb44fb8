"""Leaves the last token out by popping the request's own last block hash when the prompt is a whole number of blocks (request.block_hashes.pop()).

caught by: never hit the last token: k cached full blocks hit k - 1
hint: get_computed_blocks changed request.block_hashes, which it only reads
pattern: changes an input it only reads
"""
REPLACE = [
    ("""\
    max_blocks = (request.num_tokens - 1) // block_size
    blocks = []
    for block_hash in request.block_hashes[:max_blocks]:
""",
     """\
    hashes = request.block_hashes
    if len(hashes) * block_size == request.num_tokens:
        hashes.pop()
    blocks = []
    for block_hash in hashes:
"""),
]
