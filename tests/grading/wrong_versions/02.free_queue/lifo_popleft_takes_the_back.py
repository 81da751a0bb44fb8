"""LIFO: popleft takes the back.

caught by: popleft hands out the least recently used block; append adds at the back
hint: popleft() must return the FRONT block
"""
REPLACE = [
    ("""\
block = self.fake_free_list_head.next_free_block
        if block is self.fake_free_list_tail:""",
     """\
block = self.fake_free_list_tail.prev_free_block
        if block is self.fake_free_list_head:"""),
]
