"""Returns all zeros for an arena with no request (its free slots are never counted).

caught by: random cases against the reference, whole state compared
hint: not to the capacity
"""
REPLACE = [
    ("""\
    acc = {"used": 0, "reservation": 0, "internal": 0, "external": 0, "free": 0}
""",
     """\
    acc = {"used": 0, "reservation": 0, "internal": 0, "external": 0, "free": 0}
    if not snapshot["requests"]:
        return acc
"""),
]
