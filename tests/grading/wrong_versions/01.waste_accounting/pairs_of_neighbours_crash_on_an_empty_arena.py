"""Computes the holes from pairs of neighbouring reservations and the first/last one: an arena with no request crashes.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ("""\
    pos = 0
    holes = []
    for r in sorted(snapshot["requests"], key=lambda r: r["start"]):
        if r["start"] > pos:
            holes.append(r["start"] - pos)
        pos = r["start"] + r["reserved"]
    if snapshot["capacity"] > pos:
        holes.append(snapshot["capacity"] - pos)
""",
     """\
    reqs = sorted(snapshot["requests"], key=lambda r: r["start"])
    holes = [reqs[0]["start"]]
    for a, b in zip(reqs, reqs[1:]):
        holes.append(b["start"] - (a["start"] + a["reserved"]))
    holes.append(snapshot["capacity"] - (reqs[-1]["start"] + reqs[-1]["reserved"]))
"""),
]
