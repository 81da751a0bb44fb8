"""When the request preempts itself, goes on with the running requests after it instead of stopping the running pass (only priority can pick a victim with others after it).

caught by: random cases against the reference, whole state compared
hint: preempted itself (it was the victim when it could not grow): stop the running pass
engine: a different schedule within every contract the engine checks (recompute gives the same tokens): check() compares the schedule
"""
REPLACE = [
    ("""\
        if req not in running:
            break
        scheduled[req.request_id] = n
""",
     """\
        if req not in running:
            continue
        scheduled[req.request_id] = n
"""),
]
