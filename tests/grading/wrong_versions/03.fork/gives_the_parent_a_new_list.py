"""Hands the parent's own list to the child and gives the parent a copy: the caller's table now belongs to the child.

caught by: random cases against the reference, whole state compared
hint: give the CHILD a new list
"""
REPLACE = [
    ("return Seq(child_id, list(parent.block_table), parent.num_tokens)",
     """child = Seq(child_id, parent.block_table, parent.num_tokens)
    parent.block_table = list(parent.block_table)  # the parent gets its own copy
    return child"""),
]
