"""Sorts the snapshot's request list in place (snapshot["requests"].sort(...)) to walk it in address order.

caught by: requests listed out of address order
hint: your function changed `arena`
pattern: changes an input it only reads
"""
REPLACE = [
    ("""    for r in sorted(snapshot["requests"], key=lambda r: r["start"]):\n""",
     """    snapshot["requests"].sort(key=lambda r: r["start"])\n    for r in snapshot["requests"]:\n"""),
]
