"""popleft on an empty queue hands out the tail sentinel instead of raising ValueError.

caught by: popleft on an empty queue raises ValueError
hint: raise ValueError
engine: the engine checks num_free_blocks before it pops, so it never pops an empty queue
"""
REPLACE = [
    ("""\
        if block is self.fake_free_list_tail:
            raise ValueError("no free blocks available")
""",
     ''),
]
