"""popleft unlinks the front block from the queue but leaves the block's own links set.

caught by: popleft hands out the least recently used block; append adds at the back
hint: a block taken out still has links
"""
REPLACE = [
    ("""\
        self.remove(block)
        return block
""",
     """\
        self.fake_free_list_head.next_free_block = block.next_free_block
        block.next_free_block.prev_free_block = self.fake_free_list_head
        self.num_free_blocks -= 1
        return block
"""),
]
