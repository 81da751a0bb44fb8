"""get_all_free_blocks pops every block to list them, leaving the queue empty.

caught by: get_all_free_blocks lists the queue front first
hint: get_all_free_blocks only reads
"""
REPLACE = [
    ('        out = []\n        block = self.fake_free_list_head.next_free_block\n        while block is not self.fake_free_list_tail:\n            out.append(block)\n            block = block.next_free_block\n        return out\n',
     '        out = []\n        while self.num_free_blocks:\n            out.append(self.popleft())\n        return out\n'),
]
