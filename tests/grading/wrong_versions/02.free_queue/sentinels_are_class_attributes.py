"""Makes the two sentinel blocks class attributes: a second queue (the swap pool's) re-links the first queue's ends.

caught by: random cases against the reference, whole state compared
hint: does another queue share its sentinel blocks
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
