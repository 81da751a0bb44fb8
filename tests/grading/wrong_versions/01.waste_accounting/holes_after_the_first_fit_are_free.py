"""Classifies holes as first-fit would scan them: holes before the first one that fits are external, all later ones free.

caught by: random cases against the reference, whole state compared
hint: a hole is external fragmentation only if it is too small
"""
REPLACE = [
    ("""\
    for h in holes:
        acc["external" if h < need else "free"] += h
""",
     """\
    fits = False
    for h in holes:
        fits = fits or h >= need
        acc["free" if fits else "external"] += h
"""),
]
