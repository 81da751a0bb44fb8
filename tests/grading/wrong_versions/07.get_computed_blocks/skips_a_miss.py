"""Skips a missing block and keeps walking (continue instead of break).

caught by: the walk stops at the first miss, even when a later block is cached
hint: stop at the first miss
"""
REPLACE = [
    ("""\
        if block is None:
            break
""",
     """\
        if block is None:
            continue
"""),
]
