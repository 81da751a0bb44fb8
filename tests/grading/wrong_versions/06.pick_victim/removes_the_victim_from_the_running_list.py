"""Removes the victim from the running list.

caught by: fcfs: the request admitted last
"""
REPLACE = [
    ('return running[-1]',
     'return running.pop()'),
]
