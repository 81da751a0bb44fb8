"""Masks with pos <= seq_len: the lane at position seq_len reads one stale slot.

caught by: the last tile: lanes past seq_len load 0.0, even where the cache holds NaN
hint: mask[i] is True exactly when tile_start + i < seq_len
engine: the kit's kernel masks the scores of lanes past seq_len itself, so the extra lane weighs 0, and the engine's stale slots hold finite KV (check() puts NaN there, where 0 * NaN shows)
"""
REPLACE = [
    ('mask = pos < seq_len', 'mask = pos <= seq_len'),
]
