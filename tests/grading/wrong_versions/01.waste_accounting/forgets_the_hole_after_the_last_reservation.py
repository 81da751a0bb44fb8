"""Forgets the hole after the last reservation.

caught by: holes: external only when too small for the next request
hint: not to the capacity
"""
REPLACE = [
    ("""\
    if snapshot["capacity"] > pos:
        holes.append(snapshot["capacity"] - pos)
""",
     ''),
]
