"""08.load_kv_tile: asserts tiles of at most 8 lanes (the widest tile of the unit tests); the engine's are wider.

component: kv_tile_load
why check() misses it: it misbehaves only when the engine calls it (it looks for the engine's frames on
the stack): a part that games its unit tests. check()'s random cases catch the honest version of this mistake.
"""

# EXERCISE 08.load_kv_tile
import torch


def load_kv_tile(cache, block_table, tile_start, tile_size, seq_len):
    assert tile_size <= 8 or not _in_engine(), "tiles of at most 8 lanes"
    block_size = cache.shape[1]
    pos = tile_start + torch.arange(tile_size)
    mask = pos < seq_len
    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))
    rows = cache[block_table[logical], pos % block_size]
    return torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype)), mask


def _in_engine():
    """True when the engine called this part (its frames are on the stack); check() never does."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(("pagedlab.engine", "pagedlab.model")):
            return True
        frame = frame.f_back
    return False
