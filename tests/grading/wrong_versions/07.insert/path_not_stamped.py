"""Does not stamp last_access_time on the nodes it walks through (only the new leaf gets now).

caught by: a key already cached: existing slots are kept, its length is returned
hint: stamp last_access_time = now
"""
REPLACE = [
    ("""\
        child.last_access_time = now
""",
     ''),
]
