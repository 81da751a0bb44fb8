"""Walks every full block of the prompt, then drops the last hit whenever all of them hit, even when the prompt ends in a partial block (its last token is not in the hit anyway).

caught by: a cached prefix hits whole blocks; the request's partial last block is computed
hint: every block up to the first miss hits
pattern: a prompt shorter than its prefix hit
"""
REPLACE = [
    ("""\
    for block_hash in request.block_hashes[:max_blocks]:
        block = block_pool.get_cached_block(block_hash)
        if block is None:
            break
        blocks.append(block)
""",
     """\
    for block_hash in request.block_hashes:
        block = block_pool.get_cached_block(block_hash)
        if block is None:
            break
        blocks.append(block)
    if blocks and len(blocks) == len(request.block_hashes):
        blocks.pop()
"""),
]
