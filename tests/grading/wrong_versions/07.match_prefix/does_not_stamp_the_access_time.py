"""Does not stamp the access time.

caught by: a whole node matches; the path is stamped with now
hint: stamp last_access_time = now
"""
REPLACE = [
    ("""\
        child.last_access_time = now
""",
     ''),
]
