"""Sorts the reservations' starts but pairs them with the sizes in list order.

caught by: every step of a replay with power-of-two reservations (Orca Pow2)
hint: not to the capacity
"""
REPLACE = [
    ("""\
    for r in sorted(snapshot["requests"], key=lambda r: r["start"]):
        if r["start"] > pos:
            holes.append(r["start"] - pos)
        pos = r["start"] + r["reserved"]
""",
     """\
    starts = sorted(r["start"] for r in snapshot["requests"])
    sizes = [r["reserved"] for r in snapshot["requests"]]
    for start, size in zip(starts, sizes):
        if start > pos:
            holes.append(start - pos)
        pos = start + size
"""),
]
