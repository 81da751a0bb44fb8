"""priority: compares arrival times to the millisecond (round(arrival_time, 3)), so requests arriving within the same millisecond tie and the first of them is preempted.

caught by: random cases against the reference, whole state compared
hint: among equal priorities
engine: the plugged settings submit on a fixed clock, 0.4 ms apart, and their requests of equal priority are two submissions apart, so rounding to the millisecond keeps them apart; check()'s cases draw arrivals within one millisecond
"""
REPLACE = [
    ('key=lambda r: (r.priority, r.arrival_time)',
     'key=lambda r: (r.priority, round(r.arrival_time, 3))'),
]
