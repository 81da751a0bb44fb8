"""Walks the running requests sorted by request_id (to be deterministic) instead of in the order of `running`: "10" sorts before "9".

caught by: a random workload of 12 requests, step by step
hint: oldest first
"""
REPLACE = [
    ("""\
    for req in running:
""",
     """\
    for req in sorted(running, key=lambda r: r.request_id):
"""),
]
