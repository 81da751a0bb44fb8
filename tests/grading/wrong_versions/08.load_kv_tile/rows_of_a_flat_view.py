"""Reads the rows through cache.view(num_slots, num_kv_heads * head_dim) indexed by slot (block * block_size + row): view refuses a cache whose KV heads are padded or strided (a slice of a wider cache), which the toy's contiguous caches never are.

caught by: random cases against the reference, whole state compared
hint: view size is not compatible
engine: the engine runs the tile load on a contiguous cache of slot numbers (model.attention.plan_tile_loads), which view takes
"""
REPLACE = [
    ("    rows = cache[blocks, pos % block_size]\n",
     "    slots = blocks * block_size + pos % block_size\n"
     "    rows = cache.view(-1, cache.shape[2] * cache.shape[3])[slots].view(tile_size, *cache.shape[2:])\n"),
]
