"""Recompute preemption frees the victim's blocks but keeps its num_computed_tokens.

caught by: fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over
hint: set its num_computed_tokens to 0
"""
REPLACE = [
    ("""\
                victim.num_computed_tokens = 0
""",
     ""),
]
