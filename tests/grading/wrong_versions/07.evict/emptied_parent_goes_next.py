"""Evicts a parent left without children right after its last child (climbing up the path), even when an older leaf is waiting.

caught by: random cases against the reference, whole state compared
hint: smallest (last_access_time, id) first
engine: no eviction of the engine's radix settings empties a parent that a later lookup stamped while an older leaf waits elsewhere (a waiting request's repeated lookup does that; check() builds it)
"""
REPLACE = [
    ("""\
        x = heapq.heappop(leaves)
        freed += x.value
        evicted += len(x.key)
        parent = x.parent
        del parent.children[x.key[0]]
        if parent is not root and not parent.children and parent.lock_ref == 0:
            heapq.heappush(leaves, parent)
""",
     """\
        x = heapq.heappop(leaves)
        while True:
            freed += x.value
            evicted += len(x.key)
            parent = x.parent
            del parent.children[x.key[0]]
            if evicted < num_tokens and parent is not root and not parent.children and parent.lock_ref == 0:
                x = parent
            else:
                break
"""),
]
