"""Keeps only the last victim in the preempted list (preempted = [victim id] instead of appending).

caught by: swap: the victim moves to the CPU pool and comes back before any waiting request
hint: only the last victim is listed
pattern: two victims in one step
"""
REPLACE = [
    ("""\
            preempted.append(victim.request_id)
""",
     """\
            preempted = [victim.request_id]
"""),
]
