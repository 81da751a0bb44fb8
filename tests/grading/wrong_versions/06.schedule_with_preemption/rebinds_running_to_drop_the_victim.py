"""Drops the victim by binding a new list (running = [r for r in running if r is not victim]) instead of removing it from the running list it was given.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: is still in the `running` list you were given
pattern: rebinds what it must change in place
"""
REPLACE = [
    ("""\
            running.remove(victim)
""",
     """\
            running = [r for r in running if r is not victim]
"""),
]
