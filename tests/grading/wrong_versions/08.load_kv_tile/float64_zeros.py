"""Builds the zero rows in float64: the tile comes back in float64, not the cache's dtype.

caught by: a tile inside one block
hint: a mask you multiply by
hint: the tile keeps the cache's dtype
pattern: returns another container or number type
engine: the engine runs the tile load on a float64 slot cache (model.attention.plan_tile_loads), so float64 zeros keep its dtype
"""
REPLACE = [
    ('torch.zeros((), dtype=cache.dtype)',
     'torch.zeros(rows.shape, dtype=torch.float64)'),
]
