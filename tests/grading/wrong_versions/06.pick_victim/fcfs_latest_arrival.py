"""fcfs: preempts the request that arrived last (max arrival_time) instead of the end of the running list.

caught by: fcfs: a request re-admitted after a preemption is at the end now
hint: a request that was preempted and re-admitted sits there
engine: under fcfs the engine's running list stays in arrival order (a victim, the latest arrival, is re-admitted ahead of any newer request), so the latest arrival is the end of the list
"""
REPLACE = [
    ("""\
    return running[-1]
""",
     """\
    return max(running, key=lambda r: r.arrival_time)
"""),
]
