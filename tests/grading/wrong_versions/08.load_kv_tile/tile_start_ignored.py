"""Forgets tile_start: every tile reads positions 0 .. tile_size - 1.

caught by: a tile inside one block
hint: lane i reads position pos = tile_start + i
"""
REPLACE = [
    ("""\
    pos = tile_start + torch.arange(tile_size)
""",
     """\
    pos = torch.arange(tile_size)
"""),
]
