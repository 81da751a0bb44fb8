"""Keeps no count: num_free_blocks is a property that walks the list, O(n) on every read (the scheduler reads it every step).

caught by: random cases against the reference, whole state compared
hint: keep a count that each operation updates
engine: slower, not wrong: the same count (check() counts the blocks each read touches)
"""
REPLACE = [
    ("""\
    def __init__(self, blocks):
""",
     """\
    @property
    def num_free_blocks(self):
        return len(self.get_all_free_blocks())

    def __init__(self, blocks):
"""),
    ("        self.num_free_blocks = len(blocks)\n", ""),
    ("        self.num_free_blocks -= 1\n", ""),
    ("        self.num_free_blocks += 1\n", ""),
    ("        self.num_free_blocks += len(blocks)\n", ""),
]
