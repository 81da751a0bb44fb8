"""Puts an admitted request at the front of running instead of the end.

caught by: three requests arriving together: prefill, then decode one token per step
hint: to the end of `running`
"""
REPLACE = [
    ("""\
        running.append(req)
""",
     """\
        running.insert(0, req)
"""),
]
