"""Admits waiting requests while a preempted request is still swapped out (it should come back first).

caught by: swap: the victim moves to the CPU pool and comes back before any waiting request
hint: joined in a step that preempted (or while a request is swapped out)
"""
REPLACE = [
    ('    while not preempted and not swapped and waiting and len(running) < max_num_seqs:',
     '    while not preempted and waiting and len(running) < max_num_seqs:'),
]
