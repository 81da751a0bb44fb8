"""Counts evicted nodes instead of evicted tokens, so it frees too much.

caught by: the least recently used leaf goes first
hint: then you evicted more
"""
REPLACE = [
    ("""\
        evicted += len(x.key)
""",
     """\
        evicted += 1
"""),
]
