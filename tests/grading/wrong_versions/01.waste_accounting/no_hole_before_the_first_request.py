"""Starts looking for holes at the first request, missing a hole at address 0.

caught by: holes: external only when too small for the next request
hint: not to the capacity
"""
REPLACE = [
    ("""\
    pos = 0
""",
     """\
    pos = min((r["start"] for r in snapshot["requests"]), default=0)
"""),
]
