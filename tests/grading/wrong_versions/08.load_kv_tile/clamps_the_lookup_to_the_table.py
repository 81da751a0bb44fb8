"""Clamps masked lanes' logical block to the table's last entry instead of masking the lookup: a padded table's garbage entry is read.

caught by: a padded block table: entries past the sequence hold garbage and are never read
hint: masked lanes must not look it up
hint: 987654
pattern: garbage past the sequence
engine: the engine hands each sequence's table cut to its own blocks (no padding), so a masked lane's clamped lookup finds a real block, whose row the mask then zeroes
"""
REPLACE = [
    ("    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))\n",
     "    logical = torch.clamp(pos // block_size, max=len(block_table) - 1)\n"),
]
