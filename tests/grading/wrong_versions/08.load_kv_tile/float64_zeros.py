"""Builds the zero rows in float64: the tile comes back in float64, not the cache's dtype.

caught by: a tile inside one block
hint: the tile keeps the cache's dtype
"""
REPLACE = [
    ('torch.zeros((), dtype=cache.dtype)',
     'torch.zeros(rows.shape, dtype=torch.float64)'),
]
