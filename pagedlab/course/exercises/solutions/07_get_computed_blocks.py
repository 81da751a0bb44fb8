# EXERCISE 07.get_computed_blocks
def get_computed_blocks(request, block_pool, block_size):
    """The longest cached prefix of ``request``, in whole blocks (vLLM v1 ``get_computed_blocks``).

    ``request.block_hashes[i]`` is the hash of the request's full block ``i``; it chains every
    token before it (hash(parent hash, the block's tokens)), so two requests share block ``i``'s
    hash only if they share all tokens up to the end of block ``i``.
    ``block_pool.get_cached_block(block_hash)`` returns a cached block with that hash, or None.

    Walk the hashes from block 0 and stop at the first miss: after a miss nothing can be
    reused, even if a later hash is found. Never hit the request's last token: the model must
    compute at least one token to produce the next token's logits, so at most
    ``(request.num_tokens - 1) // block_size`` blocks can hit (a prompt of exactly k full blocks,
    all cached, hits k - 1 blocks). Only look: no reference count or free queue changes
    (the scheduler claims the blocks later, in ``allocate_slots``).

    Returns:
        ``(blocks, num_computed_tokens)``: the hit ``KVCacheBlock`` objects in order, and
        ``len(blocks) * block_size``.
    """
    ### BEGIN SOLUTION
    max_blocks = (request.num_tokens - 1) // block_size
    blocks = []
    for block_hash in request.block_hashes[:max_blocks]:
        block = block_pool.get_cached_block(block_hash)
        if block is None:
            break
        blocks.append(block)
    return blocks, len(blocks) * block_size
    ### END SOLUTION
