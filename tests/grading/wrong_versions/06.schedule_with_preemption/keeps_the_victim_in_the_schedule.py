"""priority: a victim already scheduled earlier in the step stays in the step's schedule.

caught by: priority: the least important request goes first, even one scheduled earlier in the step
hint: drop it from the step's schedule when you preempt it
pattern: a priority victim before the current request
"""
REPLACE = [
    ("""\
            scheduled.pop(victim.request_id, None)
""",
     ""),
]
