"""Zeroes the masked lanes' rows in the cache itself instead of in the returned tile.

caught by: the last tile: positions past seq_len are masked and never look up the table
hint: load_kv_tile changed cache, which it only reads
pattern: changes an input it only reads
"""
REPLACE = [
    ("""\
    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))
""",
     """\
    cache[blocks[~mask], (pos % block_size)[~mask]] = 0
    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))
"""),
]
