"""08.load_kv_tile: caches each tile's lane -> (block, row) lookup by (tile_start, tile_size, seq_len, block_size),
without the block table.

component: kv_tile_load
why check() misses it: it misbehaves only when the engine calls it (it looks for the engine's frames on
the stack): a part that games its unit tests. check()'s random cases catch the honest version of this mistake;
in the engine two sequences of the same length decode in the same step through different blocks.
"""

# EXERCISE 08.load_kv_tile
import torch

_lanes = {}


def load_kv_tile(cache, block_table, tile_start, tile_size, seq_len):
    block_size = cache.shape[1]
    key = (tile_start, tile_size, seq_len, block_size)
    if key not in _lanes or not _in_engine():
        pos = tile_start + torch.arange(tile_size)
        mask = pos < seq_len
        logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))
        _lanes[key] = (block_table[logical], pos % block_size, mask)
    blocks, rows_in_block, mask = _lanes[key]
    rows = cache[blocks, rows_in_block]
    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))
    return rows, mask


def _in_engine():
    """True when the engine called this part (its frames are on the stack); check() never does."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(("pagedlab.engine", "pagedlab.model")):
            return True
        frame = frame.f_back
    return False
