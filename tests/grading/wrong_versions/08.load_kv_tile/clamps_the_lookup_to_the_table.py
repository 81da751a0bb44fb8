"""Clamps masked lanes' logical block to the table's last entry instead of masking the lookup: a padded table's garbage entry is read.

caught by: a padded block table: entries past the sequence hold garbage and are never read
hint: 987654
"""
REPLACE = [
    ("    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))\n",
     "    logical = torch.clamp(pos // block_size, max=len(block_table) - 1)\n"),
]
