# EXERCISE 02.free_queue
from pagedlab.core.block_pool import KVCacheBlock


class FreeKVCacheBlockQueue:
    """The free blocks, in eviction order: a doubly linked list threaded through the blocks.

    ``popleft()`` hands out the front block. ``append(block)`` puts a freed block at the back, where a
    cached block waits its turn (least recently used first). ``prepend_n(blocks)`` puts freed blocks at
    the front, to be reused first (blocks with nothing cached, as vLLM 0.32.0 frees them).
    ``remove(block)`` takes a block out of the middle in O(1) (a prefix-cache hit on a block that is
    still free). No method may walk the list: each touches a constant number of blocks per block it
    is given, whatever the queue's length (``get_all_free_blocks`` is the only O(n) one).

    Links live in the blocks: ``block.prev_free_block`` and ``block.next_free_block``. Two sentinel
    blocks (``KVCacheBlock(-1)``) sit at the ends, so every queued block has both links set; a
    block that is not in the queue has both links ``None``. ``num_free_blocks`` counts queued blocks.
    """

    def __init__(self, blocks):
        """Queue ``blocks`` in the order given (front first)."""
        ### BEGIN SOLUTION
        self.num_free_blocks = len(blocks)
        self.fake_free_list_head = KVCacheBlock(-1)
        self.fake_free_list_tail = KVCacheBlock(-1)
        prev = self.fake_free_list_head
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = prev
        ### END SOLUTION

    def popleft(self):
        """Remove and return the front block. Raise ``ValueError`` if the queue is empty."""
        ### BEGIN SOLUTION
        block = self.fake_free_list_head.next_free_block
        if block is self.fake_free_list_tail:
            raise ValueError("no free blocks available")
        self.remove(block)
        return block
        ### END SOLUTION

    def remove(self, block):
        """Unlink ``block`` from wherever it is in the queue, in O(1)."""
        ### BEGIN SOLUTION
        block.prev_free_block.next_free_block = block.next_free_block
        block.next_free_block.prev_free_block = block.prev_free_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1
        ### END SOLUTION

    def append(self, block):
        """Put ``block`` at the back of the queue (most recently used)."""
        ### BEGIN SOLUTION
        last = self.fake_free_list_tail.prev_free_block
        last.next_free_block = block
        block.prev_free_block = last
        block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = block
        self.num_free_blocks += 1
        ### END SOLUTION

    def prepend_n(self, blocks):
        """Put ``blocks`` at the front in the order given: ``blocks[0]`` is handed out next."""
        ### BEGIN SOLUTION
        prev = self.fake_free_list_head
        first = prev.next_free_block
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = first
        first.prev_free_block = prev
        self.num_free_blocks += len(blocks)
        ### END SOLUTION

    def get_all_free_blocks(self):
        """All queued blocks, front first (walks the list: for tests and pictures)."""
        ### BEGIN SOLUTION
        out = []
        block = self.fake_free_list_head.next_free_block
        while block is not self.fake_free_list_tail:
            out.append(block)
            block = block.next_free_block
        return out
        ### END SOLUTION
