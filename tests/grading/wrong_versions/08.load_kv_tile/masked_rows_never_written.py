"""Allocates the tile with cache.new_empty and writes only the unmasked rows: the masked rows are never zeroed (they hold whatever the allocator left there, often zeros).

caught by: the last tile: positions past seq_len are masked and never look up the table
hint: lane i reads position pos = tile_start + i
"""
REPLACE = [
    ("""\
    rows = cache[blocks, pos % block_size]
    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))
""",
     """\
    rows = cache.new_empty((tile_size, *cache.shape[2:]))
    rows[mask] = cache[blocks[mask], (pos % block_size)[mask]]
"""),
]
