"""Keeps every lane's lookup in range with (pos // block_size) % len(block_table) instead of masking it: with a padded table, a masked lane reads a garbage entry.

caught by: a padded block table: entries past the sequence hold garbage and are never read
hint: masked lanes must not look it up
hint: 987654
pattern: garbage past the sequence
engine: the engine hands each sequence's table cut to its own blocks (no padding), so a masked lane's wrapped lookup finds a real block, whose row the mask then zeroes
"""
REPLACE = [
    ("    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))\n",
     "    logical = (pos // block_size) % len(block_table)\n"),
]
