"""prepend_n puts the blocks at the front one at a time, so they end up in reverse order.

caught by: prepend_n puts blocks at the front, in the order given
hint: keeps the order given
"""
REPLACE = [
    ("""\
        prev = self.fake_free_list_head
        first = prev.next_free_block
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = first
        first.prev_free_block = prev
        self.num_free_blocks += len(blocks)
""",
     """\
        for block in blocks:
            first = self.fake_free_list_head.next_free_block
            self.fake_free_list_head.next_free_block = block
            block.prev_free_block = self.fake_free_list_head
            block.next_free_block = first
            first.prev_free_block = block
        self.num_free_blocks += len(blocks)
"""),
]
