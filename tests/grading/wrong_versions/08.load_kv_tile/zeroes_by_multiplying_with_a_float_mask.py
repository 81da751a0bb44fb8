"""Zeroes the masked lanes by multiplying the rows with mask.float(): an fp16 or bf16 tile comes back float32.

caught by: fp16 and bf16 caches: the tile keeps the cache's dtype
hint: a mask you multiply by
hint: the tile keeps the cache's dtype
pattern: fp16 / bf16 caches
engine: the engine runs the tile load on a float64 slot cache (model.attention.plan_tile_loads), never an fp16 or bf16 one: a float32 mask leaves the tile float64
"""
REPLACE = [
    ("rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))",
     "rows = rows * mask.float()[:, None, None]"),
]
