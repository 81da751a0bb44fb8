"""Sorts the block table in place after changing it, as if block ids had to be in order.

caught by: random cases against the reference, whole state compared
hint: never sort it
engine: in the plugged settings the tables come out of fresh pools in block-id order, so sorting them changes nothing
"""
REPLACE = [
    ("""\
    seq.num_tokens += 1
    return copy
""",
     """\
    seq.block_table.sort()
    seq.num_tokens += 1
    return copy
"""),
]
