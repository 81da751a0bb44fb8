# EXERCISE 02.slot_mapping
def slot_mapping(block_table, positions, block_size):
    """The physical KV slot of each token position of one request.

    ``block_table[i]`` is the physical block holding the request's logical block ``i`` (its tokens
    ``i * block_size`` ... ``(i + 1) * block_size - 1``). A physical block ``b`` owns the slots
    ``b * block_size`` ... ``b * block_size + block_size - 1`` of the flat KV cache.

    Returns:
        a list of ints, one slot per position, in the order of ``positions``.
    """
    ### BEGIN SOLUTION
    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]
    ### END SOLUTION
