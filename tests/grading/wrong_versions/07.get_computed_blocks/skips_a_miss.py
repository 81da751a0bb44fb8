"""Skips a missing block and keeps walking (continue instead of break).

caught by: the walk stops at the first miss, even when a later block is cached
hint: stop at the first miss
engine: the engine frees a request's blocks last block first and a hit always claims a whole prefix, so evictions cut a cached prefix from its end: a cached block never follows a miss here (check() builds such a pool by hand)
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
