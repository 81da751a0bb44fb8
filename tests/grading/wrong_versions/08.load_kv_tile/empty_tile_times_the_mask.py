"""Builds the tile with torch.empty, copies the unmasked rows in and "zeroes" the rest by multiplying with the mask: the masked rows hold whatever the allocator left there, and garbage times 0 is not 0 when it is NaN or inf.

caught by: the last tile: positions past seq_len are masked and never look up the table
hint: lane i reads position pos = tile_start + i
"""
REPLACE = [
    ("""\
    rows = cache[blocks, pos % block_size]
    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))
""",
     """\
    rows = torch.empty((tile_size, *cache.shape[2:]), dtype=cache.dtype)
    rows[mask] = cache[blocks[mask], (pos % block_size)[mask]]
    rows = rows * mask[:, None, None]
"""),
]
