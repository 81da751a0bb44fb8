"""RadixCache unit tests (SGLang 0.4.6 semantics)."""

import pytest

from pagedlab.core.radix_cache import RadixCache
from pagedlab.errors import ConfigError


def sizes_ok(rc):
    assert rc.evictable_size() + rc.protected_size() == rc.total_size()


def test_insert_returns_length_already_present_and_match_splits():
    rc = RadixCache()
    assert rc.insert([1, 2, 3, 4], [10, 20, 30, 40]) == 0
    assert rc.insert([1, 2, 3, 4, 5]) == 4
    assert rc.insert([1, 2, 9]) == 2  # splits [1,2,3,4] at 2
    value, node = rc.match_prefix([1, 2, 3, 7])
    assert value == [10, 20, 30] and node.key == [3]  # split again so last_node covers exactly [1,2,3]
    assert node.parent.key == [1, 2]
    assert rc.match_prefix([8])[0] == [] and rc.match_prefix([8])[1] is rc.root_node
    assert rc.total_size() == 6  # 1,2 | 3 | 4 | 5 | 9
    sizes_ok(rc)


def test_existing_values_win_on_insert():
    rc = RadixCache()
    rc.insert([1, 2], [10, 20])
    rc.insert([1, 2, 3], [11, 21, 31])
    assert rc.match_prefix([1, 2, 3])[0] == [10, 20, 31]


def test_lock_moves_tokens_between_evictable_and_protected_and_survives_split():
    rc = RadixCache()
    rc.insert([1, 2, 3, 4])
    _, node = rc.match_prefix([1, 2, 3, 4])
    rc.inc_lock_ref(node)
    assert (rc.evictable_size(), rc.protected_size()) == (0, 4)
    rc.insert([1, 2, 5])  # splits the locked node: the new parent copies its lock
    sizes_ok(rc)
    assert rc.protected_size() == 4 and rc.evictable_size() == 1
    freed = []
    rc.evict(100, freed.extend)
    assert freed == [5]  # locked path untouched
    rc.dec_lock_ref(node)
    assert (rc.evictable_size(), rc.protected_size()) == (4, 0)
    with pytest.raises(ValueError):
        rc.dec_lock_ref(node)
    sizes_ok(rc)


def test_evict_is_leaf_first_lru_and_pushes_parent_when_it_becomes_leaf():
    rc = RadixCache()
    rc.insert([1, 2, 3])  # t1
    rc.insert([1, 2, 4])  # t2: splits into [1,2] -> {3}, {4}
    rc.insert([7, 8])  # t3
    rc.match_prefix([1, 2, 3])  # refresh branch 3 and the shared parent
    order = []
    rc.evict(1, lambda v: order.append(list(v)))
    assert order == [[4]]  # least recently used leaf
    rc.evict(3, lambda v: order.append(list(v)))
    assert order == [[4], [7, 8], [3]]
    rc.evict(2, lambda v: order.append(list(v)))
    assert order[-1] == [1, 2]  # the shared parent goes last, once it is a leaf
    assert rc.total_size() == 0 and rc.evictable_size() == 0


def test_page_size_matches_whole_pages_and_splits_on_pages():
    rc = RadixCache(page_size=2)
    assert rc.insert([1, 2, 3, 4, 5]) == 0  # truncated to 4 tokens
    assert rc.total_size() == 4
    assert rc.match_prefix([1, 2, 3, 9])[0] == [1, 2]  # second page differs
    assert rc.insert([1, 2, 3, 9]) == 2
    for n in rc.nodes():
        assert len(n.key) % 2 == 0
    sizes_ok(rc)


def test_extra_key_namespaces_never_share():
    rc = RadixCache()
    rc.insert([1, 2, 3], extra_key=(("lora", "X"),))
    assert rc.match_prefix([1, 2, 3])[0] == []
    assert rc.match_prefix([1, 2, 3], extra_key=(("salt", "X"),))[0] == []
    assert rc.match_prefix([1, 2, 3], extra_key=(("lora", "X"),))[0] == [1, 2, 3]


@pytest.mark.parametrize("bad", [0, -1, 1.5, None])
def test_bad_page_size(bad):
    with pytest.raises(ConfigError):
        RadixCache(bad)


def test_snapshot_and_pretty_print():
    import json

    rc = RadixCache()
    rc.insert([1, 2, 3])
    snap = json.loads(json.dumps(rc.snapshot()))
    assert snap["root"]["children"][0]["key"] == [1, 2, 3]
    assert "evictable=3" in rc.pretty_print()


def brute_evictable_leaves(rc):
    """Unlocked leaves found by walking the whole tree (what SGLang 0.4.6 did per evict)."""
    return sorted(n for n in rc.nodes() if not n.children and n.lock_ref == 0)


def test_evictable_leaf_set_tracks_insert_match_lock_and_evict():
    import random

    rng = random.Random(0)
    rc = RadixCache()
    locked = []
    for _ in range(400):
        op = rng.random()
        key = [rng.randrange(4) for _ in range(rng.randrange(1, 7))]
        if op < 0.4:
            rc.insert(key)
        elif op < 0.6:
            rc.match_prefix(key)
        elif op < 0.75:
            node = rc.match_prefix(key)[1]
            rc.inc_lock_ref(node)
            locked.append(node)
        elif op < 0.85 and locked:
            rc.dec_lock_ref(locked.pop(rng.randrange(len(locked))))
        else:
            # The reference: the LRU unlocked leaf by a full walk must be the one evicted first.
            expect = brute_evictable_leaves(rc)
            got = []
            rc.evict(1, got.append)
            assert got == ([expect[0].value] if expect else [])
        assert rc.evictable_leaves() == brute_evictable_leaves(rc)
        sizes_ok(rc)


def test_evicting_one_leaf_does_not_rebuild_a_heap_over_all_leaves(monkeypatch):
    import heapq

    import pagedlab.core.radix_cache as mod

    rc = RadixCache()
    for i in range(4096):
        rc.insert([i, i])
    work = {"heapify": 0, "pops": 0}
    real_heapify, real_heappop = heapq.heapify, heapq.heappop

    def heapify(h):
        work["heapify"] += len(h)
        real_heapify(h)

    def heappop(h):
        work["pops"] += 1
        return real_heappop(h)

    monkeypatch.setattr(mod.heapq, "heapify", heapify)
    monkeypatch.setattr(mod.heapq, "heappop", heappop)
    monkeypatch.setattr(RadixCache, "nodes", lambda self: pytest.fail("evict walked the tree"))
    freed = []
    assert rc.evict(2, freed.append) == 2
    assert freed == [[0, 0]] and work == {"heapify": 0, "pops": 1}
    assert len(rc.evictable_leaves()) == 4095
