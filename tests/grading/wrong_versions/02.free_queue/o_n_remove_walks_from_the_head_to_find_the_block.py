"""O(n) remove: walks from the head to find the block.

caught by: every operation is O(1): it touches a constant number of blocks
hint: costs O(n)
"""
REPLACE = [
    ('        block.prev_free_block.next_free_block = block.next_free_block\n',
     '        node = self.fake_free_list_head\n        while node is not block:\n            node = node.next_free_block\n        block.prev_free_block.next_free_block = block.next_free_block\n'),
]
