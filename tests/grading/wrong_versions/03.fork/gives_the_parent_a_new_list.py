"""Hands the parent's own list to the child and gives the parent a copy: the caller's table now belongs to the child.

caught by: fork shares every block and allocates nothing
hint: fork changed parent.block_table, which it only reads
"""
REPLACE = [
    ("return Seq(child_id, list(parent.block_table), parent.num_tokens)",
     """child = Seq(child_id, parent.block_table, parent.num_tokens)
    parent.block_table = list(parent.block_table)  # the parent gets its own copy
    return child"""),
]
