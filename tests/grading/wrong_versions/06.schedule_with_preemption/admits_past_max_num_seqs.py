"""Admits waiting requests without looking at max_num_seqs.

caught by: more requests than max_num_seqs: the rest wait, and join as places free up
hint: at most max_num_seqs
pattern: more requests than max_num_seqs
"""
REPLACE = [
    ("while not preempted and not swapped and waiting and len(running) < max_num_seqs:",
     "while not preempted and not swapped and waiting:"),
]
