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


def _queue(pool):
    return [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]


def test_queue_prepend_n_puts_blocks_at_the_front_in_order():
    blocks = [KVCacheBlock(i) for i in range(6)]
    q = FreeKVCacheBlockQueue(blocks[:2])
    q.prepend_n([])
    assert [b.block_id for b in q.get_all_free_blocks()] == [0, 1] and q.num_free_blocks == 2
    q.prepend_n([blocks[4], blocks[2], blocks[5]])
    assert [b.block_id for b in q.get_all_free_blocks()] == [4, 2, 5, 0, 1] and q.num_free_blocks == 5
    assert blocks[0].prev_free_block is blocks[5] and blocks[5].next_free_block is blocks[0]  # spliced both ways
    assert q.fake_free_list_head.next_free_block is blocks[4] and blocks[4].prev_free_block is q.fake_free_list_head
    q.append(blocks[3])
    assert [b.block_id for b in q.popleft_n(6)] == [4, 2, 5, 0, 1, 3]
    q.prepend_n([blocks[1], blocks[0]])  # onto an empty queue: before the tail sentinel
    assert [b.block_id for b in q.get_all_free_blocks()] == [1, 0]
    assert q.fake_free_list_tail.prev_free_block is blocks[0] and q.num_free_blocks == 2


def test_free_puts_unhashed_blocks_at_the_front_and_touch_removes_from_middle():
    # vLLM 0.32.0 BlockPool.free_blocks: no hash -> front (prepend_n), in the order given
    pool = BlockPool(6, enable_caching=True)
    a = pool.get_new_blocks(3)  # 0,1,2 ; queue 3,4,5
    pool.free_blocks(reversed(a))
    assert _queue(pool) == [2, 1, 0, 3, 4, 5]
    pool.touch([pool.blocks[4]])
    assert _queue(pool) == [2, 1, 0, 3, 5]
    assert pool.blocks[4].ref_cnt == 1
    pool.touch([pool.blocks[4]])
    assert pool.blocks[4].ref_cnt == 2
    check_pool(pool)


def test_free_splits_one_list_hashed_to_the_tail_unhashed_to_the_front():
    pool = BlockPool(6, enable_caching=True)
    blocks = pool.get_new_blocks(4)  # 0..3 ; queue 4,5
    pool.cache_full_blocks(_Req([b"h0", b"h1"]), blocks, 0, 2, 4)  # 0 and 1 hashed
    pool.free_blocks(reversed(blocks))  # 3, 2, 1, 0
    assert _queue(pool) == [3, 2, 4, 5, 1, 0]
    assert pool.get_cached_block(b"h1") is blocks[1]  # the cached chain waits at the tail, its tail first
    assert [b.block_id for b in pool.get_new_blocks(3)] == [3, 2, 4]  # the unhashed ones are reused first
    assert pool.get_cached_block(b"h0") is blocks[0] and pool.get_cached_block(b"h1") is blocks[1]
    check_pool(pool)


def test_free_with_caching_off_puts_every_block_at_the_front():
    # `block.block_hash is None or not self.enable_caching`: a block that somehow has a hash still goes first
    pool = BlockPool(5, enable_caching=False)
    blocks = pool.get_new_blocks(3)  # 0,1,2 ; queue 3,4
    blocks[0].block_hash = b"stale"  # not published (caching off), but set
    pool.free_blocks([blocks[0], blocks[2], blocks[1]])
    assert _queue(pool) == [0, 2, 1, 3, 4]
    blocks[0].reset_hash()
    check_pool(pool)


def test_free_a_block_named_twice_joins_where_it_reaches_zero_and_an_empty_free_changes_nothing():
    pool = BlockPool(5, enable_caching=True)
    a, b, c = pool.get_new_blocks(3)  # queue 3,4
    pool.touch([a])  # a: 2 references
    before = pool.snapshot()
    pool.free_blocks([])
    assert pool.snapshot() == before
    pool.free_blocks([a, b, a, c])  # a reaches 0 at its second mention, after b
    assert _queue(pool) == [1, 0, 2, 3, 4]
    assert [x.ref_cnt for x in pool.blocks] == [0] * 5
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
    (reused,) = pool.get_new_blocks(1)  # hashed: both to the tail, h1 (freed first) first, so it goes first
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
