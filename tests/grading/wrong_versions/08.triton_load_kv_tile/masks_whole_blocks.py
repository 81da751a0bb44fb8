"""Masks the cache load by whole blocks (pos // BLOCK_SIZE < cdiv(seq_len, BLOCK_SIZE)): the lanes past seq_len inside the sequence's last block load its stale slots.

caught by: the last tile: lanes past seq_len load 0.0, even where the cache holds NaN
hint: masked lanes must load 0.0
engine: the kit's kernel masks the scores of lanes past seq_len itself, so the extra lanes weigh 0, and the engine's stale slots hold finite KV (check() puts NaN there, where 0 * NaN shows)
"""
REPLACE = [
    ('tile = tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask[:, None], other=0.0)',
     'in_blocks = pos // BLOCK_SIZE < tl.cdiv(seq_len, BLOCK_SIZE)\n'
     '    tile = tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=in_blocks[:, None], other=0.0)'),
]
