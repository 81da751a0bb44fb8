"""KVCacheManager's collaborators: one prefix-cache strategy per mode, the fork_cow hook of CopyOnWrite."""

from __future__ import annotations

from typing import Any

import pytest

from pagedlab.core.block_pool import BlockPool, KVCacheBlock
from pagedlab.core.copy_on_write import CopyOnWrite
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.core.prefix_cache import HashPrefixCache, NoPrefixCache, RadixPrefixCache

from .helpers import check_manager, make_request, state_of
from .test_fork_swap import decode, prefill


def mgr(**kw) -> KVCacheManager:
    return KVCacheManager(4, 16, 1024, hash_seed=0, **kw)


@pytest.mark.parametrize(
    "kw,cls,name",
    [
        ({}, NoPrefixCache, "none"),
        ({"enable_caching": True, "prefix_cache": "hash"}, HashPrefixCache, "hash"),
        ({"enable_caching": True, "prefix_cache": "radix"}, RadixPrefixCache, "radix"),
        ({"enable_caching": False, "prefix_cache": "radix"}, NoPrefixCache, "none"),
    ],
)
def test_the_manager_holds_one_strategy_for_its_mode(kw, cls, name):
    m = mgr(**kw)
    assert type(m.prefix) is cls and m.prefix.name == name and m.prefix.enabled is (name != "none")
    assert (m.use_hash, m.use_radix) == (name == "hash", name == "radix")
    assert (m.block_hasher is not None) == (name == "hash") and (m.radix_cache is not None) == (name == "radix")
    assert m.block_pool.enable_caching is (name == "hash")  # the radix tree keeps the pool's hash map off
    assert m.prefix.block_pool is m.block_pool and m.cow.block_pool is m.block_pool
    assert m.swap_space.block_pool is m.block_pool


def test_without_caching_nothing_hits_and_nothing_is_counted():
    m = mgr()
    a = make_request(m, "a", range(9))
    prefill(m, a)
    m.free(a)
    again = make_request(m, "b", range(9))
    assert m.get_computed_blocks(again) == ([], 0)
    m.record_prefix_cache_stats(again, [])
    assert m.prefix_cache_stats.requests == 0 and m.prefix.owned_block_ids() == []


def test_radix_lock_hit_pins_the_hit_and_forget_unpins_it():
    m = mgr(enable_caching=True, prefix_cache="radix")
    a = make_request(m, "a", range(13))
    prefill(m, a)
    m.free(a)  # 3 full blocks go into the tree
    assert m.prefix.num_evictable_blocks() == 3 and m.num_free_blocks == 16
    b = make_request(m, "b", [*range(8), 99])
    hits, n = m.get_computed_blocks(b)
    assert n == 8 and len(hits) == 2 and {h.block_id for h in hits} <= set(m.prefix.owned_block_ids())
    m.prefix.lock_hit(b, hits)
    assert m.prefix.num_evictable_blocks() == 1 and m.num_free_blocks == 14
    m.prefix.forget("b")
    assert m.prefix.num_evictable_blocks() == 3 and m.num_free_blocks == 16
    m.prefix.forget("b")  # a second forget is a no-op, not an unbalanced unlock
    assert m.radix_cache.protected_size() == 0
    check_manager(m)


def test_radix_lock_hit_refuses_a_stale_hit():
    m = mgr(enable_caching=True, prefix_cache="radix")
    a = make_request(m, "a", range(13))
    prefill(m, a)
    m.free(a)
    b = make_request(m, "b", range(13))
    hits, _ = m.get_computed_blocks(b)
    with pytest.raises(ValueError, match="prefix hit is stale"):
        m.prefix.lock_hit(b, hits[::-1])
    assert m.radix_cache.protected_size() == 0 and "b" not in m.prefix._node


def test_hash_fork_shares_the_published_count_and_forget_drops_it():
    m = mgr(enable_caching=True, prefix_cache="hash")
    p = make_request(m, "p", range(10))
    prefill(m, p)
    assert m.prefix.num_cached_block == {"p": 2}
    kid = make_request(m, "k", p.all_token_ids)
    m.fork(p, kid)
    assert m.prefix.num_cached_block == {"p": 2, "k": 2}
    m.free(kid)
    assert m.prefix.num_cached_block == {"p": 2}


class RecordingCow(CopyOnWrite):
    """A copy-on-write that does what the kit does, recording the manager's calls."""

    def __init__(self, pool: BlockPool, block_size: int, tracer: Any) -> None:
        super().__init__(pool, block_size, tracer)
        self.calls: list[tuple[Any, ...]] = []

    def fork_table(self, parent_id: str, table: list[KVCacheBlock], num_tokens: int, child_id: str) -> list:
        self.calls.append(("fork", parent_id, child_id, num_tokens))
        return super().fork_table(parent_id, table, num_tokens, child_id)

    def extend(self, request_id: str, req_blocks: list, span: tuple[int, int], copies: list, n: int) -> list:
        self.calls.append(("extend", request_id, span, list(copies), n))
        return super().extend(request_id, req_blocks, span, copies, n)


def _fork_and_decode(m: KVCacheManager) -> list:
    p = make_request(m, "p", range(10))
    prefill(m, p)
    kid = make_request(m, "k", p.all_token_ids)
    m.fork(p, kid)
    copies = []
    for req, tok in [(p, 50), (kid, 51), (p, 52), (kid, 53), (p, 54)]:
        assert decode(m, req, tok) is not None
        copies += m.take_pending_copies()
    check_manager(m)
    return [state_of(m), copies]


@pytest.mark.parametrize("kw", [{}, {"enable_caching": True, "prefix_cache": "hash"}])
def test_the_cow_factory_gets_every_fork_and_extension_and_matches_the_kit(kw):
    hooks: list[RecordingCow] = []

    def factory(pool: BlockPool, block_size: int, tracer: Any) -> RecordingCow:
        hooks.append(RecordingCow(pool, block_size, tracer))
        return hooks[-1]

    m = mgr(cow_factory=factory, **kw)
    assert _fork_and_decode(m) == _fork_and_decode(mgr(**kw))
    (hook,) = hooks
    assert hook.block_pool is m.block_pool and hook.block_size == 4
    assert hook.calls == [  # the 10-token prefill takes 3 blocks; the shared last block is copied once per table
        ("extend", "p", (0, 10), [], 3),
        ("fork", "p", "k", 10),
        ("extend", "p", (10, 11), [2], 0),
        ("extend", "k", (10, 11), [], 0),
        ("extend", "p", (11, 12), [], 0),
        ("extend", "k", (11, 12), [], 0),
        ("extend", "p", (12, 13), [], 1),
    ]


def test_a_failed_decode_allocation_keeps_the_lock_of_an_earlier_radix_hit():
    """Found by the state machine: a request that got a radix hit, then could not get a block for a
    later token, lost the lock on its hit path (``allocate_slots`` called ``forget`` on any failure),
    leaving tree blocks it still holds unlocked and evictable. Only this call's lock is undone now."""
    from pagedlab.core.kv_cache_manager import KVCacheManager
    from tests.core.helpers import check_manager, make_request

    m = KVCacheManager(2, 4, 64, enable_caching=True, prefix_cache="radix")
    a = make_request(m, "a", [1, 2, 3, 4, 5])
    assert m.allocate_slots(a, 5) is not None
    a.num_computed_tokens = 5
    m.free(a)  # its two full blocks go into the tree
    b = make_request(m, "b", [1, 2, 3, 4, 9])
    hits, n = m.get_computed_blocks(b)
    assert n == 4 and m.allocate_slots(b, 1, n, hits) is not None
    b.num_computed_tokens = 5
    c = make_request(m, "c", [7, 7])
    assert m.allocate_slots(c, 2) is not None and m.block_pool.get_num_free_blocks() == 0
    b.append_output_token_ids(0)
    assert m.allocate_slots(b, 1) is not None  # position 5: still in its last block
    b.num_computed_tokens = 6
    b.append_output_token_ids(0)
    assert m.allocate_slots(b, 1) is None  # position 6 needs a block: none free, none evictable
    check_manager(m)  # b's hit path is still locked: its tree blocks are not evictable
    assert m.prefix.num_evictable_blocks() == 0
