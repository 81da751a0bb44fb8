"""priority: picks the victim by one number, priority * 1000 + arrival_time: wrong once arrival times are time.perf_counter() seconds (thousands).

caught by: random cases against the reference, whole state compared
hint: even one already scheduled in this step
engine: the engine's arrival times are seconds apart at most in these settings, which 1000 per priority level outweighs: the same victims
"""
REPLACE = [
    ('victim = max(running, key=lambda r: (r.priority, r.arrival_time))',
     'victim = max(running, key=lambda r: r.priority * 1000 + r.arrival_time)'),
]
