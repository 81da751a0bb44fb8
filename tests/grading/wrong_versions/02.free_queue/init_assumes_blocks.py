"""__init__ links blocks[0] to the head sentinel without checking that there is a block: an empty queue breaks.

caught by: an empty queue: popleft raises, then blocks can be appended
engine: the engine builds its queue over the whole pool, never over an empty list of blocks
"""
REPLACE = [
    ("""\
        prev = self.fake_free_list_head
        for block in blocks:
""",
     """\
        self.fake_free_list_head.next_free_block = blocks[0]
        prev = self.fake_free_list_head
        for block in blocks:
"""),
]
