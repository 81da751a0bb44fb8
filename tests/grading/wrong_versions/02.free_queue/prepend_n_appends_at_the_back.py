"""prepend_n adds the blocks at the back (append), as vLLM 0.11 freed every block.

caught by: prepend_n puts blocks at the front, in the order given
hint: at the FRONT
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
            self.append(block)
"""),
]
