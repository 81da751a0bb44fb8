"""The references of exercises 06.schedule_with_preemption, 07.get_computed_blocks and
08.triton_load_kv_tile agree with the library code they teach (Scheduler, KVCacheManager, the
PyTorch reference attention)."""
from __future__ import annotations

import random
from typing import Any

import pytest

from pagedlab.grading import registry


def ref(eid: str) -> Any:
    return registry.get(eid).get_reference()


@pytest.mark.parametrize("block_size,seed", [(1, 0), (4, 1), (16, 2)])
def test_get_computed_blocks_matches_the_kv_cache_manager(block_size: int, seed: int) -> None:
    from pagedlab.core.kv_cache_manager import KVCacheManager
    from pagedlab.grading.exercises.lab07_lookup import tokens
    from pagedlab.request import Request
    fn = ref("07.get_computed_blocks")
    kv = KVCacheManager(block_size, 64, 4096, enable_caching=True, hash_seed=7)
    rng = random.Random(seed)
    hits = 0
    for i in range(30):
        req = Request(f"r{i}", tokens(rng.randint(1, 3), rng.randint(1, 3 * block_size + 2)),
                      block_hasher=kv.block_hasher)
        before = kv.block_pool.snapshot()
        mine_blocks, mine_tokens = fn(req, kv.block_pool, block_size)
        assert kv.block_pool.snapshot() == before
        lib_blocks, lib_tokens = kv.get_computed_blocks(req)
        assert [b.block_id for b in mine_blocks] == [b.block_id for b in lib_blocks]
        assert mine_tokens == lib_tokens < req.num_tokens
        hits += len(lib_blocks)
        if kv.allocate_slots(req, req.num_tokens - lib_tokens, lib_tokens, lib_blocks) is not None:
            req.num_computed_tokens = req.num_tokens
            if rng.random() < 0.8:
                kv.free(req)
    assert hits > 5, "the workload must produce prefix hits"
