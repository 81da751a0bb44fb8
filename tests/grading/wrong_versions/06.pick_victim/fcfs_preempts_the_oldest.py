"""Fcfs: preempts the oldest.

caught by: fcfs: the request admitted last
hint: fcfs preempts the request admitted LAST
"""
REPLACE = [
    ('return running[-1]',
     'return running[0]'),
]
