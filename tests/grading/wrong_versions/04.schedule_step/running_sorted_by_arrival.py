"""Walks the running requests by request id (sorted(running, key=request_id)), not in running order.

caught by: a random workload of 12 requests, step by step
hint: oldest first
pattern: running requests walked out of order
"""
REPLACE = [
    ("""\
    for req in running:
""",
     """\
    for req in sorted(running, key=lambda r: r.request_id):
"""),
]
