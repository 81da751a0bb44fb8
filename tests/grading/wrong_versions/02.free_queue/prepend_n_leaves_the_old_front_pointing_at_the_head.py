"""prepend_n links the new blocks forward but never points the old front's prev_free_block back at them.

caught by: prepend_n puts blocks at the front, in the order given
hint: prev_free_block does not point back
not hint: a block taken out still has links
"""
REPLACE = [
    ("""\
        prev.next_free_block = first
        first.prev_free_block = prev
""",
     """\
        prev.next_free_block = first
"""),
]
