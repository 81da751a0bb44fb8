"""Puts a swapped-out victim at the FRONT of swapped (appendleft, as recompute does with waiting): with two swap victims in one step, the later one comes back first.

caught by: swap: the victim moves to the CPU pool and comes back before any waiting request
"""
REPLACE = [
    ("""\
                swapped.append(victim)
""",
     """\
                swapped.appendleft(victim)
"""),
]
