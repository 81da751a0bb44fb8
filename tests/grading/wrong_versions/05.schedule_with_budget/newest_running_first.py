"""Walks the running requests newest first (reversed(running)): the newest decodes take the budget first.

caught by: decodes first, then prefill chunks with what is left of the budget
hint: (their decodes) first, in the order of `running`
pattern: running requests walked out of order
"""
REPLACE = [
    ("""\
    for req in running:
        if budget <= 0:
""",
     """\
    for req in reversed(running):
        if budget <= 0:
"""),
]
