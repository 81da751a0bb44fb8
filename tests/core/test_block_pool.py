"""Unit tests of KVCacheBlock, FreeKVCacheBlockQueue and BlockPool (vLLM v1 semantics)."""

import json

import pytest

from pagedlab.core.block_pool import BlockPool, FreeKVCacheBlockQueue, KVCacheBlock
from pagedlab.errors import ConfigError, DoubleFreeError, NoFreeBlocksError

from .helpers import check_pool


def test_queue_popleft_append_remove_middle():
    blocks = [KVCacheBlock(i) for i in range(5)]
    q = FreeKVCacheBlockQueue(blocks)
    assert [b.block_id for b in q.get_all_free_blocks()] == [0, 1, 2, 3, 4]
    q.remove(blocks[2])
    assert [b.block_id for b in q.get_all_free_blocks()] == [0, 1, 3, 4]
    assert q.popleft() is blocks[0]
    assert [b.block_id for b in q.popleft_n(2)] == [1, 3]
    q.append(blocks[2])
    q.append_n([blocks[0], blocks[1]])
    assert [b.block_id for b in q.get_all_free_blocks()] == [4, 2, 0, 1]
    assert q.num_free_blocks == 4
    with pytest.raises(NoFreeBlocksError):
        q.popleft_n(5)
    q.popleft_n(4)
    with pytest.raises(NoFreeBlocksError):
        q.popleft()


def test_block_hash_is_write_once():
    b = KVCacheBlock(0)
    b.block_hash = b"x"
    with pytest.raises(AssertionError):
        b.block_hash = b"y"
    b.reset_hash()
    b.block_hash = b"y"
    assert b.block_hash == b"y"


def test_pool_has_no_null_block_and_all_blocks_usable():
    pool = BlockPool(4, enable_caching=False)
    got = pool.get_new_blocks(4)
    assert sorted(b.block_id for b in got) == [0, 1, 2, 3]
    assert pool.get_usage() == 1.0
    check_pool(pool)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "8", True, None])
def test_pool_of_zero_or_bad_blocks_rejected(bad):
    with pytest.raises(ConfigError):
        BlockPool(bad, enable_caching=True)


def test_over_allocation_raises_and_changes_nothing():
    pool = BlockPool(3, enable_caching=True)
    pool.get_new_blocks(2)
    before = pool.snapshot()
    with pytest.raises(NoFreeBlocksError):
        pool.get_new_blocks(2)
    assert pool.snapshot() == before


def test_free_appends_at_tail_in_given_order_and_touch_removes_from_middle():
    pool = BlockPool(6, enable_caching=True)
    a = pool.get_new_blocks(3)  # 0,1,2 ; queue 3,4,5
    pool.free_blocks(reversed(a))
    assert [b.block_id for b in pool.free_block_queue.get_all_free_blocks()] == [3, 4, 5, 2, 1, 0]
    pool.touch([pool.blocks[5]])
    assert [b.block_id for b in pool.free_block_queue.get_all_free_blocks()] == [3, 4, 2, 1, 0]
    assert pool.blocks[5].ref_cnt == 1
    pool.touch([pool.blocks[5]])
    assert pool.blocks[5].ref_cnt == 2
    check_pool(pool)


def test_double_free_raises_with_no_state_change():
    pool = BlockPool(4, enable_caching=False)
    a, b = pool.get_new_blocks(2)
    pool.free_blocks([a])
    before = pool.snapshot()
    with pytest.raises(DoubleFreeError):
        pool.free_blocks([b, a])  # b is valid, a is not: nothing may change
    assert pool.snapshot() == before
    with pytest.raises(DoubleFreeError):
        pool.free_blocks([b, b])
    assert pool.snapshot() == before


class _Req:
    def __init__(self, hashes):
        self.request_id = "r"
        self.block_hashes = hashes


def test_lazy_eviction_drops_hash_only_on_reuse():
    pool = BlockPool(2, enable_caching=True)
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(_Req([b"h0", b"h1"]), blocks, 0, 2, 4)
    pool.free_blocks(reversed(blocks))
    # Free but cached: still findable.
    assert pool.get_cached_block(b"h0") is blocks[0]
    assert pool.get_cached_block(b"h1") is blocks[1]
    (reused,) = pool.get_new_blocks(1)  # the tail (h1) was freed first, so it goes first
    assert reused is blocks[1] and reused.block_hash is None
    assert pool.get_cached_block(b"h1") is None
    assert pool.get_cached_block(b"h0") is blocks[0]
    check_pool(pool)


def test_reset_prefix_cache_refused_while_held():
    pool = BlockPool(2, enable_caching=True)
    blocks = pool.get_new_blocks(1)
    pool.cache_full_blocks(_Req([b"h"]), blocks, 0, 1, 4)
    assert pool.reset_prefix_cache() is False
    assert pool.get_cached_block(b"h") is blocks[0]
    pool.free_blocks(blocks)
    assert pool.reset_prefix_cache() is True
    assert pool.get_cached_block(b"h") is None
    check_pool(pool)


def test_snapshot_is_json():
    pool = BlockPool(3, enable_caching=True)
    pool.get_new_blocks(1)
    snap = json.loads(json.dumps(pool.snapshot()))
    assert snap["num_free_blocks"] == 2 and snap["blocks"][0]["ref_cnt"] == 1
