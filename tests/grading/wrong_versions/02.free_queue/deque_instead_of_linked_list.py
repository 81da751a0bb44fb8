"""Keeps the free blocks in a collections.deque and never sets the blocks' prev/next links.

caught by: a new queue holds the blocks given, in order
hint: num_free_blocks is
hint: the check reads the queue through the blocks' own prev_free_block / next_free_block
"""
# EXERCISE 02.free_queue
from collections import deque


class FreeKVCacheBlockQueue:
    def __init__(self, blocks):
        self.q = deque(blocks)
        self.num_free_blocks = len(self.q)

    def popleft(self):
        if not self.q:
            raise ValueError("no free blocks available")
        self.num_free_blocks -= 1
        return self.q.popleft()

    def remove(self, block):
        self.q.remove(block)
        self.num_free_blocks -= 1

    def append(self, block):
        self.q.append(block)
        self.num_free_blocks += 1

    def get_all_free_blocks(self):
        return list(self.q)
