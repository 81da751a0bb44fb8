"""Builds the masked lanes' zeros as float32 rows (zeros_like(rows, dtype=torch.float32)): an fp16 tile comes back fp32.

caught by: fp16 and bf16 caches: the tile keeps the cache's dtype
hint: a mask you multiply by
hint: the tile keeps the cache's dtype
pattern: fp16 / bf16 caches
engine: the engine runs the tile load on a float64 slot cache (model.attention.plan_tile_loads), never an fp16 or bf16 one: float32 zeros leave the tile float64
"""
REPLACE = [
    ('torch.zeros((), dtype=cache.dtype)',
     'torch.zeros_like(rows, dtype=torch.float32)'),
]
