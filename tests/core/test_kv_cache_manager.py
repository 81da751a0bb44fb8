"""KVCacheManager: vLLM v1 get_computed_blocks / allocate_slots / free contract, both prefix caches."""

import json
from typing import Any

import pytest

from pagedlab.core.copy_on_write import CopyOnWrite
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.errors import ConfigError

from .helpers import check_manager, make_request, state_of

CACHES = [("hash", True), ("radix", True)]


def mgr(bs=4, blocks=16, cache="hash", caching=True, **kw):
    return KVCacheManager(bs, blocks, 1024, enable_caching=caching, prefix_cache=cache, hash_seed=0, **kw)


def run_prefill(m, req):
    hits, n = m.get_computed_blocks(req)
    new = m.allocate_slots(req, req.num_tokens - n, n, hits)
    assert new is not None
    req.num_computed_tokens = req.num_tokens
    return hits, n


def finish(m, req):
    # A finished request has KV for all but its last sampled token (SGLang inserts tokens[:-1]).
    req.num_computed_tokens = req.num_tokens - 1
    m.free(req)


@pytest.mark.parametrize("cache,caching", CACHES)
def test_prefix_hit_is_block_aligned_and_leaves_one_token(cache, caching):
    m = mgr(cache=cache)
    a = make_request(m, "a", range(12))  # exactly 3 blocks
    run_prefill(m, a)
    a.append_output_token_ids(99)
    finish(m, a)
    b = make_request(m, "b", range(12))
    hits, n = m.get_computed_blocks(b)
    # An exact multiple recomputes its whole last block (at most num_tokens - 1, block aligned).
    assert n == 8 and len(hits) == 2
    c = make_request(m, "c", list(range(10)) + [7, 7])
    hits, n = m.get_computed_blocks(c)
    assert n == 8  # first two blocks match, third differs
    d = make_request(m, "d", [5] + list(range(1, 12)))
    assert m.get_computed_blocks(d)[1] == 0  # first block differs: nothing after a miss hits
    check_manager(m)


@pytest.mark.parametrize("cache,caching", CACHES)
def test_get_computed_blocks_changes_no_refs(cache, caching):
    m = mgr(cache=cache)
    a = make_request(m, "a", range(9))
    run_prefill(m, a)
    finish(m, a)
    before = [b.ref_cnt for b in m.block_pool.blocks]
    free_before = m.block_pool.get_num_free_blocks()
    m.get_computed_blocks(make_request(m, "b", range(9)))
    assert [b.ref_cnt for b in m.block_pool.blocks] == before
    assert m.block_pool.get_num_free_blocks() == free_before


def test_hit_on_free_block_is_touched_and_counted_against_capacity():
    m = mgr(blocks=3)
    a = make_request(m, "a", range(9))
    run_prefill(m, a)  # 3 blocks
    finish(m, a)
    assert m.num_free_blocks == 3
    b = make_request(m, "b", list(range(8)) + [50, 51, 52, 53, 54])  # 2 hits (free) + 2 new = 4 > 3
    hits, n = m.get_computed_blocks(b)
    assert n == 8
    before = state_of(m)
    assert m.allocate_slots(b, b.num_tokens - n, n, hits) is None
    assert state_of(m) == before
    c = make_request(m, "c", list(range(8)) + [50])  # 2 hits + 1 new = 3 == free
    hits, n = m.get_computed_blocks(c)
    new = m.allocate_slots(c, c.num_tokens - n, n, hits)
    assert new is not None and len(new) == 1
    assert m.get_block_ids("c")[:2] == [h.block_id for h in hits]
    check_manager(m)


@pytest.mark.parametrize("cache,caching", CACHES + [("hash", False)])
def test_allocate_failure_changes_nothing(cache, caching):
    m = mgr(blocks=4, cache=cache, caching=caching)
    a = make_request(m, "a", range(10))
    run_prefill(m, a)
    before = state_of(m)
    b = make_request(m, "b", range(100, 110))
    assert m.allocate_slots(b, 10) is None
    assert state_of(m) == before
    check_manager(m)


@pytest.mark.parametrize("cache,caching", CACHES + [("hash", False)])
def test_allocating_zero_tokens_is_an_error(cache, caching):
    m = mgr(cache=cache, caching=caching)
    a = make_request(m, "a", range(5))
    before = state_of(m)
    for bad in (0, -1, 1.0):
        with pytest.raises(ValueError):
            m.allocate_slots(a, bad)
    assert state_of(m) == before


def test_decode_grows_table_only_at_block_boundary_and_publishes_full_blocks():
    m = mgr(bs=4)
    a = make_request(m, "a", range(4))
    run_prefill(m, a)
    assert m.get_block_ids("a") == [0]
    assert m.block_pool.blocks[0].block_hash is not None  # full at schedule time: published
    for t in range(5):
        a.append_output_token_ids(100 + t)
        assert m.allocate_slots(a, 1) is not None
        a.num_computed_tokens += 1
    assert len(m.get_block_ids("a")) == 3  # 9 tokens in cache -> 3 blocks
    assert m.prefix.num_cached_block["a"] == 2
    check_manager(m)


@pytest.mark.parametrize("cache,caching", CACHES + [("hash", False)])
def test_free_returns_blocks_tail_first(cache, caching):
    # vLLM 0.32.0: freed tail first; no hash (the partial last block; every block with caching off or in the
    # radix pool) to the free queue's front, hashed ones to its tail (vLLM 0.11 put all at the tail)
    m = mgr(blocks=8, cache=cache, caching=caching)
    a = make_request(m, "a", range(10))
    run_prefill(m, a)
    ids = m.get_block_ids("a")
    m.free(a)
    queue = m.snapshot()["free_queue"]
    freed = [b for b in queue if b in ids]
    if cache == "radix" and caching:
        assert freed == [ids[2]] and queue[0] == ids[2]  # the tree adopted the two full computed blocks
    elif caching:
        assert queue[0] == ids[2] and queue[-2:] == [ids[1], ids[0]]  # 0 and 1 are full: hashed, cached
    else:
        assert queue[:3] == list(reversed(ids))
    check_manager(m)


def test_salted_requests_do_not_share():
    m = mgr()
    a = make_request(m, "a", range(9), cache_salt="tenant-1")
    run_prefill(m, a)
    finish(m, a)
    assert m.get_computed_blocks(make_request(m, "b", range(9), cache_salt="tenant-2"))[1] == 0
    assert m.get_computed_blocks(make_request(m, "c", range(9)))[1] == 0
    assert m.get_computed_blocks(make_request(m, "d", range(9), cache_salt="tenant-1"))[1] == 8


@pytest.mark.parametrize("cache,caching", CACHES)
def test_prefix_cache_stats_count_tokens(cache, caching):
    m = mgr(cache=cache)
    a = make_request(m, "a", range(9))
    run_prefill(m, a)
    finish(m, a)
    b = make_request(m, "b", range(9))
    hits, _ = m.get_computed_blocks(b)
    assert m.prefix_cache_stats == type(m.prefix_cache_stats)(), "a lookup alone counts nothing"
    m.record_prefix_cache_stats(a, [])
    m.record_prefix_cache_stats(b, hits)
    b.num_preemptions = 1  # a re-admission after preemption is counted apart
    m.record_prefix_cache_stats(b, hits)
    stats = m.make_prefix_cache_stats()
    assert (stats.requests, stats.queries, stats.hits) == (2, 18, 8)
    assert (stats.preempted_requests, stats.preempted_queries, stats.preempted_hits) == (1, 9, 8)
    assert stats.hit_rate == 8 / 18 and m.prefix_cache_stats.queries == 0
    off = mgr(caching=False)
    off.record_prefix_cache_stats(make_request(off, "c", range(9)), [])
    assert off.prefix_cache_stats.requests == 0


@pytest.mark.parametrize("bad", [0, -4, 2.0, "16", None, True])
def test_bad_block_size_is_a_config_error(bad):
    with pytest.raises(ConfigError):
        KVCacheManager(bad, 8, 64)


@pytest.mark.parametrize(
    "kw", [dict(num_gpu_blocks=0), dict(max_model_len=0), dict(num_cpu_blocks=-1), dict(prefix_cache="lru")]
)
def test_bad_sizes_are_config_errors(kw):
    args = dict(block_size=4, num_gpu_blocks=8, max_model_len=64)
    args.update(kw)
    with pytest.raises(ConfigError):
        KVCacheManager(**args)


def test_max_model_len_is_enforced():
    m = KVCacheManager(4, 8, 8)
    a = make_request(m, "a", range(9))
    with pytest.raises(ValueError):
        m.allocate_slots(a, 9)


def test_block_hasher_is_none_without_hashing():
    assert KVCacheManager(4, 8, 64).block_hasher is None
    assert KVCacheManager(4, 8, 64, enable_caching=True, prefix_cache="radix").block_hasher is None
    assert KVCacheManager(4, 8, 64, enable_caching=True).block_hasher is not None


@pytest.mark.parametrize("cache,caching", CACHES)
def test_snapshot_is_json_and_names_owners(cache, caching):
    m = mgr(cache=cache)
    a = make_request(m, "a", range(6))
    run_prefill(m, a)
    snap = json.loads(json.dumps(m.snapshot()))
    assert snap["req_to_blocks"] == {"a": [0, 1]}
    assert snap["blocks"][0]["owners"] == ["a"] and snap["blocks"][1]["owners"] == ["a"]
    assert snap["blocks"][2]["free"] is True
    assert m.usage == pytest.approx(2 / 16)


def test_from_config_copies_every_field_and_prefers_the_configs_hash_seed() -> None:
    """The engine and the simulator build their manager this way: every config field must arrive."""
    from pagedlab.config import CacheConfig, SchedulerConfig
    from pagedlab.core import hashing

    cc = CacheConfig(
        block_size=4, num_gpu_blocks=7, num_cpu_blocks=3, enable_prefix_caching=True, prefix_cache="radix", hash_seed=5
    )
    sc = SchedulerConfig(max_model_len=64)
    m = KVCacheManager.from_config(cc, sc, default_hash_seed=9)
    got = (m.block_size, m.num_gpu_blocks, m.max_model_len, m.enable_caching, m.prefix_cache, m.num_cpu_blocks)
    assert got == (4, 7, 64, True, "radix", 3)
    assert (m.use_hash, m.use_radix, m.tracer) == (False, True, None)
    assert m.none_hash == hashing.make_none_hash(5)  # the config's seed wins over the default
    unseeded = CacheConfig(block_size=4, num_gpu_blocks=7)
    assert KVCacheManager.from_config(unseeded, sc, default_hash_seed=9).none_hash == hashing.make_none_hash(9)
    assert KVCacheManager.from_config(unseeded, sc).none_hash == hashing.NONE_HASH


def test_from_config_passes_the_tracer_and_every_pluggable_part_on() -> None:
    """The engine hands a learner's parts to ``from_config``; each must reach the manager it builds."""
    from pagedlab.config import CacheConfig, SchedulerConfig
    from pagedlab.core.block_pool import FreeKVCacheBlockQueue
    from pagedlab.core.kv_cache_manager import find_longest_cache_hit
    from pagedlab.core.radix_cache import RadixCache
    from pagedlab.trace import Tracer

    built: dict[str, object] = {}

    def queue(blocks: list[Any]) -> Any:
        built["free_queue"] = FreeKVCacheBlockQueue(blocks)
        return built["free_queue"]

    def lookup(*args: Any) -> Any:
        return find_longest_cache_hit(*args)

    def cow(pool: Any, block_size: int, tracer: Any) -> Any:
        built["fork_cow"] = CopyOnWrite(pool, block_size, tracer)
        return built["fork_cow"]

    def radix(page_size: int) -> Any:
        built["radix"] = RadixCache(page_size=page_size)
        return built["radix"]

    tracer, sc = Tracer(), SchedulerConfig(max_model_len=64)
    cc = CacheConfig(block_size=4, num_gpu_blocks=8, enable_prefix_caching=True)
    m = KVCacheManager.from_config(
        cc, sc, tracer=tracer, free_queue_factory=queue, prefix_lookup=lookup, cow_factory=cow
    )
    assert m.tracer is tracer and m.block_pool.tracer is tracer
    assert m.block_pool.free_block_queue is built["free_queue"] and m.cow is built["fork_cow"]
    assert m.prefix.prefix_lookup is lookup
    radix_cc = CacheConfig(block_size=4, num_gpu_blocks=8, enable_prefix_caching=True, prefix_cache="radix")
    r = KVCacheManager.from_config(radix_cc, sc, radix_tree_factory=radix)
    assert r.prefix.tree is built["radix"] and r.tracer is None
    plain = KVCacheManager.from_config(cc, sc)  # left out: the kit's own parts
    assert plain.prefix.prefix_lookup is find_longest_cache_hit and type(plain.cow) is CopyOnWrite
