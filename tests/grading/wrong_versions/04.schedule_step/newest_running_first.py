"""Walks the running requests newest first (reversed(running)).

caught by: three requests arriving together: prefill, then decode one token per step
hint: oldest first
pattern: running requests walked out of order
"""
REPLACE = [
    ("""\
    for req in running:
""",
     """\
    for req in reversed(running):
"""),
]
