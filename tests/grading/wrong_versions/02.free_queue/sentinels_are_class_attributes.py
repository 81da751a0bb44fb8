"""Makes the two sentinel blocks class attributes: a second queue (the swap pool's) re-links the first queue's ends.

caught by: random cases against the reference, whole state compared
hint: does another queue share its sentinel blocks
engine: the engine builds one queue of yours, the GPU pool's (the swap space's CPU pool keeps the kit's own queue, pagedlab/core/swap.py), so no second queue of yours re-links the shared sentinels
"""
REPLACE = [
    ("""\
class FreeKVCacheBlockQueue:
""",
     """\
class FreeKVCacheBlockQueue:
    fake_free_list_head = KVCacheBlock(-1)
    fake_free_list_tail = KVCacheBlock(-1)
"""),
    ("""\
        self.fake_free_list_head = KVCacheBlock(-1)
        self.fake_free_list_tail = KVCacheBlock(-1)
""",
     ""),
]
