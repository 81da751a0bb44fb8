# EXERCISE 08.load_kv_tile
import torch


def load_kv_tile(cache, block_table, tile_start, tile_size, seq_len):
    """One loop iteration of the paged decode kernel: read a tile of one sequence's cached rows.

    The tile covers token positions ``tile_start ... tile_start + tile_size - 1``. Position ``pos``
    lives in physical block ``block_table[pos // block_size]``, row ``pos % block_size``.
    Positions ``>= seq_len`` are masked: their rows are zeros and they must not look the block
    table up at all - it only has ``ceil(seq_len / block_size)`` entries (on a GPU an unmasked
    lookup reads garbage; here it raises).

    Args:
        cache: ``[num_blocks, block_size, num_kv_heads, head_dim]`` tensor (keys or values).
        block_table: 1-D int64 tensor of the sequence's physical block ids.
        tile_start, tile_size: first position and number of positions (lanes) of the tile.
        seq_len: number of cached tokens of the sequence.

    Returns:
        ``(rows, mask)``: rows ``[tile_size, num_kv_heads, head_dim]`` (zeros where masked) and the
        bool mask ``[tile_size]`` (``pos < seq_len``).
    """
    ### BEGIN SOLUTION
    block_size = cache.shape[1]
    pos = tile_start + torch.arange(tile_size)
    mask = pos < seq_len
    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))
    blocks = block_table[logical]
    rows = cache[blocks, pos % block_size]
    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))
    return rows, mask
    ### END SOLUTION
