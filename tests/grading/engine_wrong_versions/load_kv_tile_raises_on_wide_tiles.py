"""08.load_kv_tile: asserts tiles of at most 8 lanes (the widest tile of the unit tests); the engine's are wider.

component: kv_tile_load
why check() misses it: every unit test uses tiles of 2, 4 or 8 lanes.
"""

# EXERCISE 08.load_kv_tile
import torch


def load_kv_tile(cache, block_table, tile_start, tile_size, seq_len):
    assert tile_size <= 8, "tiles of at most 8 lanes"
    block_size = cache.shape[1]
    pos = tile_start + torch.arange(tile_size)
    mask = pos < seq_len
    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))
    rows = cache[block_table[logical], pos % block_size]
    return torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype)), mask
