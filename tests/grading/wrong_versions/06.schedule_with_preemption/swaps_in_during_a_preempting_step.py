"""Swaps requests back in even in a step that preempted (the swap-in pass ignores `preempted`): the victim comes straight back.

caught by: swap: the victim moves to the CPU pool and comes back before any waiting request
hint: swapped back in during a step that preempted
not hint: when the victim is the request you are allocating for
"""
REPLACE = [
    ("    while not preempted and swapped and len(running) < max_num_seqs:",
     "    while swapped and len(running) < max_num_seqs:"),
]
