"""After allocating, moves on with i += 1 even when a victim earlier in running was removed (a request is skipped).

caught by: priority: a victim earlier in running than the request allocating; the requests after it still run
hint: was skipped: the victim sat earlier in `running`
pattern: a priority victim before the current request
"""
REPLACE = [
    ("""\
        scheduled[req.request_id] = n
        i = running.index(req) + 1
""",
     """\
        scheduled[req.request_id] = n
        i += 1
"""),
]
