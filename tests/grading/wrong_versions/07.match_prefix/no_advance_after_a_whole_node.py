"""Forgets to drop the matched tokens from the key after a whole node matches.

caught by: a match that ends inside a node splits it
hint: the slots of every matched token
"""
REPLACE = [
    ("""\
        node = child
        key = key[n:]
""",
     """\
        node = child
"""),
]
