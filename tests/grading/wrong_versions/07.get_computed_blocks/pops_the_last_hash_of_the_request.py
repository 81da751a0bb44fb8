"""Leaves the last token out by popping the request's own last block hash when the prompt is a whole number of blocks (request.block_hashes.pop()).

caught by: random cases against the reference, whole state compared
hint: lookup only: leave the request as it is
pattern: changes an input it only reads
engine: the engine hands the lookup a view of the request holding a copy of its block hashes (pagedlab.grading.plug), so the pop never reaches the request the engine keeps; check() hands it the request itself
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
