# EXERCISE 03.append_token
from pagedlab.grading.kit import RefCountedPool, Seq


def append_token(pool, seq):
    """Make room for ``seq``'s next token (at position ``seq.num_tokens``), then count it.

    * If the position starts a new block, allocate one and add it to the block table.
    * Otherwise the token goes into the last block. If that block is shared
      (``pool.ref_cnt(block) > 1``), copy it first: allocate a new block, give up this sequence's
      reference to the shared one, and put the new block in its place in the table.

    Returns:
        ``(src, dst)`` when a block was copied (the engine then copies the KV of ``src`` into
        ``dst`` before the next forward pass), else ``None``.
    """
    ### BEGIN SOLUTION
    copy = None
    if seq.num_tokens % pool.block_size == 0:
        seq.block_table.append(pool.allocate())
    else:
        last = seq.block_table[-1]
        if pool.ref_cnt(last) > 1:
            new = pool.allocate()
            pool.free(last)
            seq.block_table[-1] = new
            copy = (last, new)
    seq.num_tokens += 1
    return copy
    ### END SOLUTION
