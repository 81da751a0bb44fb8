"""Builds the queue by popping the blocks off the list it is given: the block pool's own list of blocks is emptied.

caught by: random cases against the reference, whole state compared
hint: FreeKVCacheBlockQueue changed the blocks given to __init__, which it only reads
"""
REPLACE = [
    ("""\
        prev = self.fake_free_list_head
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = prev
        ### END SOLUTION

    def popleft""",
     """\
        self.fake_free_list_head.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        self.num_free_blocks = 0
        while blocks:
            self.append(blocks.pop(0))
        ### END SOLUTION

    def popleft"""),
]
