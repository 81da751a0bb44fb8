"""Appends the copy to the block table instead of putting it in the shared block's place.

caught by: a shared last block is copied before the write; its last owner then writes in place
hint: the copy takes that block's place in the table
hint: so it needs 3 blocks
not hint: a holder never took its reference
"""
REPLACE = [
    ("            seq.block_table[-1] = new\n", "            seq.block_table.append(new)\n"),
]
