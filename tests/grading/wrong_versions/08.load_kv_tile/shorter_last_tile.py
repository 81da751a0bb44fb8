"""Builds the last tile only up to seq_len (torch.arange(tile_start, min(tile_start + tile_size, seq_len))): the tile has fewer than tile_size lanes instead of masked ones.

caught by: the last tile: positions past seq_len are masked and never look up the table
hint: returned tensors of shapes
"""
REPLACE = [
    ("    pos = tile_start + torch.arange(tile_size)\n",
     "    pos = torch.arange(tile_start, min(tile_start + tile_size, seq_len))\n"),
]
