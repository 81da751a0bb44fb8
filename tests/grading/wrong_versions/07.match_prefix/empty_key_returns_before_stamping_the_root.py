"""Returns (empty, root) at once for an empty key, before stamping the root with now.

caught by: random cases against the reference, whole state compared
hint: stamp last_access_time = now
engine: no lookup key of the engine's radix settings is empty (a prompt of at most one block gives one; check() asks for it)
"""
REPLACE = [
    ("""\
    node = root
    node.last_access_time = now
""",
     """\
    if not key:
        return [], root
    node = root
    node.last_access_time = now
"""),
]
