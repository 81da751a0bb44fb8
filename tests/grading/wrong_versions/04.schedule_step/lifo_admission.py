"""Admits the newest waiting request first (waiting.pop() instead of the head of the queue).

caught by: three requests arriving together: prefill, then decode one token per step
hint: to the end of `running`
"""
REPLACE = [
    ("""\
        req = waiting[0]
""",
     """\
        req = waiting[-1]
"""),
    ("""\
        waiting.popleft()
""",
     """\
        waiting.pop()
"""),
]
