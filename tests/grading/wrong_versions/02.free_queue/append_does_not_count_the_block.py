"""Append does not count the block.

caught by: popleft hands out the least recently used block; append adds at the back
hint: num_free_blocks is
"""
REPLACE = [
    ("""\
        self.fake_free_list_tail.prev_free_block = block
        self.num_free_blocks += 1
""",
     """\
        self.fake_free_list_tail.prev_free_block = block
"""),
]
