"""Masks the block-table lookup but not the cache load: lanes past seq_len read whatever sits in block 0
(a stale slot, NaN here), counting on the score mask to hide it.

caught by: the last tile: lanes past seq_len load 0.0, even where the cache holds NaN
hint: masked lanes must load 0.0
pattern: garbage past the sequence
engine: the kit's kernel masks the scores of lanes past seq_len itself, so the lanes read weigh 0, and the engine's stale slots hold finite KV (check() puts NaN there, where 0 * NaN shows)
"""
REPLACE = [
    ('tile = tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask[:, None], other=0.0)',
     'tile = tl.load(cache_ptr + rows[:, None] + offs_d[None, :])'),
]
