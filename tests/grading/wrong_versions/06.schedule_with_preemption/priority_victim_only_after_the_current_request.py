"""priority: looks for the victim only among the requests after the one allocating (running[i + 1:]), never one scheduled earlier in the step.

caught by: priority: the least important request goes first, even one scheduled earlier in the step
hint: even one already scheduled in this step
pattern: a priority victim before the current request
"""
REPLACE = [
    ("victim = max(running, key=lambda r: (r.priority, r.arrival_time))",
     "victim = max(running[i + 1:] or [req], key=lambda r: (r.priority, r.arrival_time))"),
]
