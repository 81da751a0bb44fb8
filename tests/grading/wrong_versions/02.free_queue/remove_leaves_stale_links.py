"""Remove leaves stale links.

caught by: popleft hands out the least recently used block; append adds at the back
hint: a block taken out still has links
"""
REPLACE = [
    ("""\
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1
""",
     """\
        self.num_free_blocks -= 1
"""),
]
