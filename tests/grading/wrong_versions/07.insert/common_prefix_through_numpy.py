"""Finds the common prefix with numpy (argmin of an element-wise ==), which only works while every token is one int.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ("""\
        n = 0
        while n < min(len(child.key), len(key)) and child.key[n] == key[n]:
            n += 1
""",
     """\
        import numpy as np
        m = min(len(child.key), len(key))
        same = np.asarray(child.key[:m]) == np.asarray(key[:m])
        n = m if same.all() else int(np.argmin(same))
"""),
]
