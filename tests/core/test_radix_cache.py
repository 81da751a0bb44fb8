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
    rc.insert([1, 2, 3])      # t1
    rc.insert([1, 2, 4])      # t2: splits into [1,2] -> {3}, {4}
    rc.insert([7, 8])         # t3
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
