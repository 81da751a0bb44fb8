# EXERCISE 08.triton_load_kv_tile
import triton
import triton.language as tl


@triton.jit
def triton_load_kv_tile(cache_ptr, block_table_ptr, tile_start, seq_len, kv_head,
                        stride_block, stride_slot, stride_head,
                        BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Load one K (or V) tile of a sequence inside the kit's paged decode kernel (as vLLM's
    ``triton_unified_attention``, 0.9 - 0.11: a token tile independent of the block size).

    Lane ``i`` of the tile handles token position ``pos = tile_start + i``. Its row of the cache
    lives in physical block ``block_table[pos // BLOCK_SIZE]``, slot ``pos % BLOCK_SIZE``, head
    ``kv_head``: element ``d`` is at ``cache_ptr + block * stride_block + slot * stride_slot
    + kv_head * stride_head + d`` (the head dim is contiguous). Lanes with ``pos >= seq_len`` are
    masked: they read neither the block table (it has only ``ceil(seq_len / BLOCK_SIZE)`` valid
    entries) nor the cache, and load ``0.0`` - a stale slot may hold NaN, and ``0 * NaN`` is NaN.

    Args:
        cache_ptr: the cache ``[num_blocks, BLOCK_SIZE, num_kv_heads, HEAD_DIM]`` (keys or values).
        block_table_ptr: this sequence's row of the block table (int32 ids).
        tile_start, seq_len, kv_head: first position of the tile, cached tokens, KV head.
        stride_block, stride_slot, stride_head: the cache's strides, in elements.

    Returns:
        ``(tile, mask)``: ``tile`` ``[BLOCK_N, HEAD_DIM]`` (0.0 on masked lanes) and the bool ``mask``
        ``[BLOCK_N]`` (``pos < seq_len``).
    """
    ### BEGIN SOLUTION
    pos = tile_start + tl.arange(0, BLOCK_N)
    mask = pos < seq_len
    block_ids = tl.load(block_table_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)
    rows = block_ids * stride_block + (pos % BLOCK_SIZE) * stride_slot + kv_head * stride_head
    offs_d = tl.arange(0, HEAD_DIM)
    tile = tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask[:, None], other=0.0)
    return tile, mask
    ### END SOLUTION
