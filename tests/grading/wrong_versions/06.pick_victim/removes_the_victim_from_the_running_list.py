"""Removes the victim from the running list.

caught by: fcfs: the request admitted last
hint: pick_victim changed running, which it only reads
pattern: changes an input it only reads
"""
REPLACE = [
    ('return running[-1]',
     'return running.pop()'),
]
