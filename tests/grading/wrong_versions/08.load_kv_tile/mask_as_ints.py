"""Returns the mask as 0/1 integers instead of bools.

caught by: a tile inside one block
hint: a bool per lane
pattern: returns another container or number type
"""
REPLACE = [
    ("""\
    return rows, mask
""",
     """\
    return rows, mask.long()
"""),
]
