"""Walks the reservations sorted by request id (as strings), as if ids were handed out in address order.

caught by: every step of a replay with max-length reservations (Orca Max)
hint: not to the capacity
"""
REPLACE = [
    ('for r in sorted(snapshot["requests"], key=lambda r: r["start"]):',
     'for r in sorted(snapshot["requests"], key=lambda r: r["id"]):'),
]
