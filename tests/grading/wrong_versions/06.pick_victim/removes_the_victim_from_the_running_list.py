"""Removes the victim from the running list.

caught by: fcfs: the request admitted last
hint: return one of the Request objects
pattern: changes an input it only reads
"""
REPLACE = [
    ('return running[-1]',
     'return running.pop()'),
]
