"""Masks with pos <= seq_len: the lane at position seq_len reads one stale slot.

caught by: the last tile: lanes past seq_len load 0.0, even where the cache holds NaN
hint: mask[i] is True exactly when tile_start + i < seq_len
"""
REPLACE = [
    ('mask = pos < seq_len', 'mask = pos <= seq_len'),
]
