"""Admits by binding a new list (running = running + [req]) instead of appending to the running list it was given.

caught by: three requests arriving together: prefill, then decode one token per step
hint: in the `running` list you were given
pattern: rebinds what it must change in place
"""
REPLACE = [
    ("""\
        running.append(req)
""",
     """\
        running = running + [req]
"""),
]
