"""Regression tests named after the public bugs of docs/bugs.md (B1..B16), at the memory-system level.

Each asserts the *correct* behaviour; docs/bugs.md says what went wrong in the engine that had the bug.
"""

import subprocess
import sys

import pytest

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.core.radix_cache import RadixCache

from .helpers import check_manager, check_pool, make_request

CACHES = ["hash", "radix"]


def mgr(cache="hash", blocks=16, bs=4, **kw):
    return KVCacheManager(bs, blocks, 1024, enable_caching=True, prefix_cache=cache, hash_seed=0, **kw)


def schedule(m, req):
    """What the scheduler does for a waiting request: look up, size the chunk after the hit, allocate."""
    hits, n = m.get_computed_blocks(req) if req.num_computed_tokens == 0 else ([], 0)
    chunk = req.num_tokens - req.num_computed_tokens - n
    new = m.allocate_slots(req, chunk, n, hits)
    assert new is not None
    start = req.num_computed_tokens + n
    req.num_computed_tokens = start + chunk
    return hits, n, start, chunk


def slots(m, rid, start, end):
    table, bs = m.get_block_ids(rid), m.block_size
    return [table[p // bs] * bs + p % bs for p in range(start, end)]


_FIRST_HASH = (
    "from pagedlab.core.kv_cache_manager import KVCacheManager\n"
    "from pagedlab.request import Request\n"
    "m = KVCacheManager(4, 4, 64, enable_caching=True{seed})\n"
    "print(Request('p', [1, 2, 3, 4, 5], block_hasher=m.block_hasher).block_hashes[0].hex())\n"
)


def _first_block_hash(seed_arg: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_HASH.format(seed=seed_arg)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "0"},
    )
    return out.stdout.strip()


def test_B1_chain_root_is_random_per_process_unless_seeded():
    # Same prompt, two fresh processes with identical PYTHONHASHSEED: the roots must differ...
    assert _first_block_hash("") != _first_block_hash("")
    # ...unless a seed is configured (tests, reproducible labs).
    assert _first_block_hash(", hash_seed=7") == _first_block_hash(", hash_seed=7")


@pytest.mark.parametrize("cache", CACHES)
def test_B2_lora_name_and_salt_of_same_spelling_never_share(cache):
    m = mgr(cache)
    a = make_request(m, "a", range(13), lora_name="X")
    schedule(m, a)
    a.num_computed_tokens = a.num_tokens - 1
    m.free(a)
    b = make_request(m, "b", range(13), cache_salt="X")
    assert m.get_computed_blocks(b) == ([], 0)
    a2 = make_request(m, "a2", range(13), lora_name="X")
    assert m.get_computed_blocks(a2)[1] == 12  # the adapter's own entries still hit


@pytest.mark.parametrize("cache", CACHES)
def test_B3_mixed_batch_hit_and_miss_get_their_own_blocks(cache):
    m = mgr(cache)
    warm = make_request(m, "warm", range(12))
    schedule(m, warm)
    warm.num_computed_tokens = 11
    m.free(warm)
    hit = make_request(m, "hit", list(range(8)) + [40, 41, 42])
    miss = make_request(m, "miss", range(100, 111))
    h_hits, h_n, h_start, h_chunk = schedule(m, hit)
    m_hits, m_n, m_start, m_chunk = schedule(m, miss)
    assert h_n == 8 and m_n == 0
    hit_ids, miss_ids = m.get_block_ids("hit"), m.get_block_ids("miss")
    assert hit_ids[:2] == [b.block_id for b in h_hits]
    assert len(hit_ids) == 3 and len(miss_ids) == 3  # every position has a block: no zero table
    assert not set(hit_ids) & set(miss_ids)
    written = slots(m, "hit", h_start, h_start + h_chunk) + slots(m, "miss", 0, m_chunk)
    assert len(written) == len(set(written))  # no slot written twice in the batch
    cached = set(slots(m, "hit", 0, h_n))
    assert not cached & set(written)  # cached positions are read-only
    check_manager(m)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_B5_exact_multiple_prompt_fully_cached_still_computes_a_token(cache, k):
    m = mgr(cache)
    for rnd in range(3):
        req = make_request(m, f"r{rnd}", range(4 * k))
        hits, n, start, chunk = schedule(m, req)
        assert chunk >= 1 and n <= req.num_tokens - 1
        if rnd:
            assert n == 4 * (k - 1)  # and a re-run still hits afterwards
        req.num_computed_tokens = req.num_tokens  # prompt computed, nothing sampled yet
        m.free(req)
        check_manager(m)


@pytest.mark.parametrize("cache", CACHES)
def test_B6_reused_block_is_not_found_by_its_old_content(cache):
    m = mgr(cache, blocks=2)
    a = make_request(m, "a", range(5))  # one full block + one partial
    schedule(m, a)
    m.free(a)
    b = make_request(m, "b", range(50, 58))  # different content needs both blocks: reuses A's
    schedule(m, b)
    c = make_request(m, "c", range(5))
    assert m.get_computed_blocks(c) == ([], 0)
    b_ids = m.get_block_ids("b")
    m.free(b)
    hits, n = m.get_computed_blocks(make_request(m, "d", range(50, 58)))
    assert n == 4 and hits[0].block_id == b_ids[0]  # the new content is found instead
    check_manager(m)


@pytest.mark.parametrize("cache", CACHES)
def test_B8_preempted_request_rehit_sizes_chunk_after_the_hit(cache):
    m = mgr(cache, blocks=6)
    r = make_request(m, "r", range(10))
    schedule(m, r)
    for t in range(5):  # decode to 15 tokens, 14 computed
        r.append_output_token_ids(200 + t)
        assert m.allocate_slots(r, 1) is not None
        r.num_computed_tokens += 1
    r.append_output_token_ids(205)
    # Memory pressure: preempt (recompute) -> free, num_computed_tokens = 0, keep outputs.
    m.free(r)
    r.num_computed_tokens = 0
    other = make_request(m, "o", range(300, 304))
    schedule(m, other)  # takes one block (evicting the least recently used)
    hits, n, start, chunk = schedule(m, r)
    assert n > 0 and n % 4 == 0
    assert start == n and start + chunk == r.num_tokens  # start + n <= num_tokens, exactly covering
    assert len(m.get_block_ids("r")) == -(-r.num_tokens // 4)
    check_manager(m)


@pytest.mark.parametrize("cache", ["none"] + CACHES)
def test_B10_fork_cow_free_returns_every_ref_to_zero_once(cache):
    m = KVCacheManager(4, 12, 1024) if cache == "none" else mgr(cache, blocks=12)
    p = make_request(m, "p", range(10))
    schedule(m, p)
    kids = []
    for i in range(2):
        kid = make_request(m, f"k{i}", range(10))
        m.fork(p, kid)
        kids.append(kid)
    for r in [p] + kids:  # each appends into the shared last block: CoW for the first two
        r.append_output_token_ids(9)
        m.allocate_slots(r, 1)
        r.num_computed_tokens += 1
    assert len(m.take_pending_copies()) == 2
    # A table that names a block twice (as v0 sliding-window tables did) still holds one ref.
    m.req_to_blocks["k1"].append(m.req_to_blocks["k1"][0])
    extra = make_request(m, "k3", kids[1].all_token_ids)
    m.fork(kids[1], extra)
    check_manager(m)
    for r in [kids[0], p, kids[1], extra]:
        m.free(r)
        check_manager(m)
    tree = m.prefix.owned_block_ids()
    assert all(b.ref_cnt == (1 if b.block_id in tree else 0) for b in m.block_pool.blocks)
    queue = m.snapshot()["free_queue"]
    assert len(queue) == len(set(queue)) == 12 - len(tree)


def test_B12_radix_accounting_at_idle_with_pages_and_splits_under_locks():
    m = mgr("radix", blocks=24)
    system = list(range(8))
    running = []
    for i in range(6):  # shared system prompt, diverging suffixes, some at mid-node points
        r = make_request(m, f"r{i}", system + [50 + i] * (4 + 4 * (i % 3)) + [i])
        schedule(m, r)
        running.append(r)
        if i % 2:
            done = running.pop(0)
            done.num_computed_tokens = done.num_tokens
            m.free(done)
        check_manager(m)
    for r in running:
        m.free(r)
    rc = m.radix_cache
    assert rc.protected_size() == 0
    assert rc.evictable_size() + rc.protected_size() == rc.total_size()
    available = m.block_pool.get_num_free_blocks() * 4
    assert available + rc.evictable_size() + rc.protected_size() == 24 * 4
    page_rc = RadixCache(page_size=4)
    page_rc.insert(list(range(16)))
    _, node = page_rc.match_prefix(list(range(8)) + [99] * 4)
    page_rc.inc_lock_ref(node)
    page_rc.insert(list(range(4)) + [7] * 4)  # splits above the locked node
    page_rc.dec_lock_ref(node)
    assert page_rc.protected_size() == 0 and page_rc.evictable_size() == page_rc.total_size() == 20


@pytest.mark.parametrize("cache", CACHES)
def test_B14_abort_mid_chunked_prefill_leaves_no_dangling_cache_reference(cache):
    m = mgr(cache, blocks=12)
    long = make_request(m, "long", range(30))
    assert m.allocate_slots(long, 10) is not None  # chunk 1: positions 0..9 computed
    long.num_computed_tokens = 10
    m.free(long)  # abort after chunk 1
    check_manager(m)
    free_ids = set(m.snapshot()["free_queue"])
    if cache == "radix":
        assert not free_ids & set(m.prefix.owned_block_ids())  # never both free and referenced by the tree
    again = make_request(m, "again", range(30))
    hits, n = m.get_computed_blocks(again)
    assert n <= 8  # only blocks whose KV chunk 1 computed (2 full blocks)
    assert m.allocate_slots(again, again.num_tokens - n, n, hits) is not None
    check_manager(m)


def test_B16_identical_prompts_in_one_step_keep_stable_tables_and_valid_lookups():
    m = mgr("hash")
    a = make_request(m, "a", range(9))
    b = make_request(m, "b", range(9))
    a_hits, _ = m.get_computed_blocks(a)
    b_hits, _ = m.get_computed_blocks(b)  # looked up before a allocates: both miss
    m.allocate_slots(a, 9, 0, a_hits)
    table_a = m.get_block_ids("a")
    m.allocate_slots(b, 9, 0, b_hits)
    assert m.get_block_ids("a") == table_a  # vLLM's choice: no de-dup, append-only tables
    h0 = a.block_hashes[0]
    assert set(m.block_pool.cached_block_hash_to_block[h0]) == {table_a[0], m.get_block_ids("b")[0]}
    m.free(a)
    m.block_pool.get_new_blocks(m.block_pool.get_num_free_blocks())  # evict every free copy
    found = m.block_pool.get_cached_block(h0)
    assert found is not None and found.block_id == m.get_block_ids("b")[0]  # the survivor
    check_pool(m.block_pool)


def test_B16_radix_deduplicates_identical_prompts_on_insert():
    m = mgr("radix")
    a, b = make_request(m, "a", range(9)), make_request(m, "b", range(9))
    schedule(m, a)
    schedule(m, b)
    for r in (a, b):
        m.free(r)
    assert m.radix_cache.total_size() == 8 and len(m.prefix.owned_block_ids()) == 2
    check_manager(m)
