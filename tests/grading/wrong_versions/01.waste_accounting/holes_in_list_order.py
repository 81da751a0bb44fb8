"""Looks for holes in the order requests are listed, not in address order.

caught by: requests listed out of address order
hint: not to the capacity
"""
REPLACE = [
    ("""\
    for r in sorted(snapshot["requests"], key=lambda r: r["start"]):
""",
     """\
    for r in snapshot["requests"]:
"""),
]
