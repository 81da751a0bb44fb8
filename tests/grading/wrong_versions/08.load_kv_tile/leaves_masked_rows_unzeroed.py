"""Leaves masked rows unzeroed.

caught by: the last tile: positions past seq_len are masked and never look up the table
hint: lane i reads position pos = tile_start + i
"""
REPLACE = [
    ("""\
    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))
""",
     ''),
]
