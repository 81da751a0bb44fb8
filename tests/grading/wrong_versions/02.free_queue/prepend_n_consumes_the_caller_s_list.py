"""prepend_n pops the blocks off the caller's list (from the back, each to the front): the order is right, but the list is emptied.

caught by: random cases against the reference, whole state compared
hint: FreeKVCacheBlockQueue changed the blocks given to prepend_n, which it only reads
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
        while blocks:
            block = blocks.pop()
            first = self.fake_free_list_head.next_free_block
            self.fake_free_list_head.next_free_block = block
            block.prev_free_block = self.fake_free_list_head
            block.next_free_block = first
            first.prev_free_block = block
            self.num_free_blocks += 1
"""),
]
