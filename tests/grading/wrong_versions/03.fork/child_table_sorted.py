"""Gives the child the parent's blocks sorted by id, not in the parent's table order.

caught by: random cases against the reference, whole state compared
hint: keep the parent's order
engine: in the plugged settings the parents' tables come out of fresh pools in block-id order, so sorting them changes nothing
"""
REPLACE = [
    ("return Seq(child_id, list(parent.block_table), parent.num_tokens)",
     "return Seq(child_id, sorted(parent.block_table), parent.num_tokens)"),
]
