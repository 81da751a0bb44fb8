"""Assumes a child matches whole once its first token matches (never compares the rest of its key).

caught by: a match that ends inside a node splits it
hint: the slots of every matched token
pattern: a prompt shorter than its prefix hit
"""
REPLACE = [
    ("""\
        n = 0
        while n < min(len(child.key), len(key)) and child.key[n] == key[n]:
            n += 1
""",
     """\
        n = min(len(child.key), len(key))
"""),
]
