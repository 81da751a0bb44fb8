"""Reservation for future tokens counted as internal waste.

caught by: one request: used, reserved for later, and internal waste
hint: only what lies beyond final_len is 'internal'
"""
REPLACE = [
    ('acc["reservation"] += r["final_len"] - r["num_tokens"]',
     'pass'),
    ('r["reserved"] - r["final_len"]',
     'r["reserved"] - r["num_tokens"]'),
]
