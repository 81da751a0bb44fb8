"""fcfs: takes the victim with running.pop() and puts it back with running.insert(0, victim), so the running list is rotated.

caught by: fcfs: the request admitted last
hint: pick_victim changed running, which it only reads
"""
REPLACE = [
    ("""\
    return running[-1]
""",
     """\
    victim = running.pop()
    running.insert(0, victim)
    return victim
"""),
]
