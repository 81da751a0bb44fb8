# EXERCISE 03.fork
from pagedlab.grading.kit import RefCountedPool, Seq


def fork(pool, parent, child_id):
    """A new sequence ``child_id`` that shares every KV block of ``parent`` (copy-on-write).

    Nothing is allocated and nothing is copied: each block of the parent gains one owner
    (``pool.incref``). The child gets its own block-table list (with the same block ids) and the
    parent's ``num_tokens``. The parent does not change.

    Returns:
        the child ``Seq``.
    """
    ### BEGIN SOLUTION
    for block_id in parent.block_table:
        pool.incref(block_id)
    return Seq(child_id, list(parent.block_table), parent.num_tokens)
    ### END SOLUTION
