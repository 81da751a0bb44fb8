"""Looks up the block table for masked lanes.

caught by: the last tile: positions past seq_len are masked and never look up the table
hint: masked lanes must not look it up
"""
REPLACE = [
    ('logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))',
     'logical = pos // block_size'),
]
