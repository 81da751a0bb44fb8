"""Zeroes the masked lanes by multiplying the rows with the bool mask (the dtype survives): a masked lane reads a slot of the sequence's first block, and where that slot is stale and holds NaN, NaN * 0 is NaN.

caught by: random cases against the reference, whole state compared
hint: NaN * 0 is NaN
hint: torch.where(mask, rows, 0)
pattern: garbage past the sequence
engine: the engine runs the tile load on a cache of slot numbers (model.attention.plan_tile_loads), never NaN: a masked row times 0 is 0
"""
REPLACE = [
    ("rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))",
     "rows = rows * mask[:, None, None]"),
]
