"""Returns the tile upcast to float32 (rows.float()) "for accuracy".

caught by: fp16 and bf16 caches: the tile keeps the cache's dtype
hint: a mask you multiply by
hint: the tile keeps the cache's dtype
pattern: fp16 / bf16 caches
"""
REPLACE = [
    ("    return rows, mask\n", "    return rows.float(), mask\n"),
]
