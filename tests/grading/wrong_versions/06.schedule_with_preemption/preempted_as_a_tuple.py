"""Returns the preempted ids as a tuple, where the engine needs a list.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: the contract of schedule_with_preemption: a tuple (dict, list)
pattern: returns another container or number type
"""
REPLACE = [
    ("    return scheduled, preempted\n", "    return scheduled, tuple(preempted)\n"),
]
