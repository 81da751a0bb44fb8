"""Builds the masked lanes' zeros as float32 rows (zeros_like(rows, dtype=torch.float32)): an fp16 tile comes back fp32.

caught by: fp16 and bf16 caches: the tile keeps the cache's dtype
hint: the tile keeps the cache's dtype
"""
REPLACE = [
    ('torch.zeros((), dtype=cache.dtype)',
     'torch.zeros_like(rows, dtype=torch.float32)'),
]
