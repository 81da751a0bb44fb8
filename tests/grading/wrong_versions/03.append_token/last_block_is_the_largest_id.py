"""Takes the largest block id of the table as its last block (tables are in block-id order only in a fresh pool).

caught by: random cases against the reference, whole state compared
hint: Copy the block first
engine: in the plugged settings the tables come out of fresh pools in block-id order, so the largest id is the last block
"""
REPLACE = [
    ("        last = seq.block_table[-1]\n", "        last = max(seq.block_table)\n"),
    ("            seq.block_table[-1] = new\n", "            seq.block_table[seq.block_table.index(last)] = new\n"),
]
