"""Fcfs: preempts the oldest.

caught by: fcfs: the request admitted last
"""
REPLACE = [
    ('return running[-1]',
     'return running[0]'),
]
