"""prepend_n links the blocks in but does not add them to num_free_blocks.

caught by: prepend_n puts blocks at the front, in the order given
hint: num_free_blocks is
"""
REPLACE = [
    ("""\
        first.prev_free_block = prev
        self.num_free_blocks += len(blocks)
""",
     """\
        first.prev_free_block = prev
"""),
]
