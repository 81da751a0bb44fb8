"""analysis.lab02.time_free_queue: what it times and on which container."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

from pagedlab.analysis.lab02 import time_free_queue
from pagedlab.core.block_pool import KVCacheBlock


class CountingQueue:
    """A deque with vLLM's free-queue interface that counts its calls."""

    instances: list[CountingQueue] = []

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.q: deque[KVCacheBlock] = deque(blocks)
        self.calls: Counter[str] = Counter()
        CountingQueue.instances.append(self)

    def popleft(self) -> KVCacheBlock:
        self.calls["popleft"] += 1
        return self.q.popleft()

    def remove(self, b: Any) -> None:
        self.calls["remove"] += 1
        self.q.remove(b)

    def append(self, b: Any) -> None:
        self.calls["append"] += 1
        self.q.append(b)


def test_time_free_queue_times_every_case_on_the_given_class() -> None:
    CountingQueue.instances.clear()
    out = time_free_queue(CountingQueue, pool_sizes=(10, 40), n_ops=7, n_ops_naive=3, repeats=2)
    assert list(out) == [
        "linked list: popleft + append",
        "linked list: remove + append",
        "BlockPool: get_new_blocks(1) + free_blocks",
        "Python list: pop(0) + append",
        "Python list: remove + append",
        "deque: remove + append",
    ]
    assert all(set(v) == {10, 40} and all(t > 0 for t in v.values()) for v in out.values())
    assert len(CountingQueue.instances) == 2  # one queue per pool size
    for inst, n in zip(CountingQueue.instances, (10, 40)):
        # 2 repeats x 7 ops of each linked-list case; every block is back in the queue afterwards
        assert inst.calls == {"popleft": 14, "remove": 14, "append": 28}
        assert sorted(b.block_id for b in inst.q) == list(range(n))
