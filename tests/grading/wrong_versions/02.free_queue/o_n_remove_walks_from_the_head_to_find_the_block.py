"""O(n) remove: walks from the head to find the block.

caught by: every operation is O(1): it touches a constant number of blocks
hint: costs O(n)
engine: slower, not wrong: the same block leaves the queue (check() counts the blocks each operation touches)
"""
REPLACE = [
    ("""\
        block.prev_free_block.next_free_block = block.next_free_block
""",
     """\
        node = self.fake_free_list_head
        while node is not block:
            node = node.next_free_block
        block.prev_free_block.next_free_block = block.next_free_block
"""),
]
