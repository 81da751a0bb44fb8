"""priority: when every running request has the same priority, falls back to fcfs (the end of the running list) instead of the latest arrival: a request re-admitted after a preemption sits at the end although it arrived early.

caught by: random cases against the reference, whole state compared
hint: among equal priorities
engine: another victim among equal priorities is a different schedule within every contract the engine checks: the tokens are the same; check() compares the victim
"""
REPLACE = [
    ("""\
    if policy == "priority":
""",
     """\
    if policy == "priority" and len({r.priority for r in running}) > 1:
"""),
]
