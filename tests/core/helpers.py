"""Shared helpers for the core tests: request factories and the invariant checker."""

from __future__ import annotations

from collections import Counter

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.core.radix_cache import RadixCache
from pagedlab.request import Request


def make_request(manager: KVCacheManager, rid: str, tokens: list[int], **kw) -> Request:
    return Request(rid, list(tokens), block_hasher=manager.block_hasher, **kw)


def check_pool(pool) -> None:
    """BlockPool invariants: queue <=> ref 0, links consistent, hash map <=> block hash."""
    free = pool.free_block_queue.get_all_free_blocks()
    ids = [b.block_id for b in free]
    assert len(ids) == len(set(ids)), "free queue has duplicates"
    assert len(ids) == pool.get_num_free_blocks()
    in_queue = set(ids)
    for b in pool.blocks:
        assert b.ref_cnt >= 0
        assert (b.block_id in in_queue) == (b.ref_cnt == 0), f"block {b.block_id} ref={b.ref_cnt}"
        assert (b.prev_free_block is not None) == (b.block_id in in_queue)
    held = sum(1 for b in pool.blocks if b.ref_cnt > 0)
    assert pool.get_num_free_blocks() + held == pool.num_gpu_blocks
    mapped = {}
    for h, entry in pool.cached_block_hash_to_block.items():
        assert entry, "empty map entry"
        for bid, blk in entry.items():
            assert blk.block_id == bid and blk.block_hash == h
            mapped[bid] = h
    for b in pool.blocks:
        assert (b.block_hash is not None) == (b.block_id in mapped)


def check_manager(m: KVCacheManager) -> None:  # noqa: C901 - a test oracle: invariants checked one after another
    """Manager invariants: ref_cnt == distinct tables holding the block (+1 if the tree holds it)."""
    check_pool(m.block_pool)
    expect = Counter()
    for blocks in m.req_to_blocks.values():
        for bid in {b.block_id for b in blocks}:
            expect[bid] += 1
    for bid in m.prefix.owned_block_ids():
        expect[bid] += 1
    for b in m.block_pool.blocks:
        assert b.ref_cnt == expect[b.block_id], f"block {b.block_id}: ref {b.ref_cnt} != owners {expect[b.block_id]}"
    if m.cpu_block_pool is not None:
        check_pool(m.cpu_block_pool)
        cexp = Counter()
        for blocks in m.req_to_cpu_blocks.values():
            for bid in {b.block_id for b in blocks}:
                cexp[bid] += 1
        for c in m.cpu_block_pool.blocks:
            assert c.ref_cnt == cexp[c.block_id]
    if m.use_radix and not isinstance(m.radix_cache, RadixCache):
        check_learner_tree(m)
    elif m.use_radix:
        rc = m.radix_cache
        assert rc.evictable_size() + rc.protected_size() == rc.total_size()
        assert rc.evictable_size() >= 0 and rc.protected_size() >= 0
        bs = m.block_size
        tree_ids = [s // bs for s in rc.all_values()[::bs]]
        assert sorted(tree_ids) == sorted(m.prefix.owned_block_ids()), "tree values != tree-owned blocks"
        assert len(tree_ids) == len(set(tree_ids)), "a block is in the tree twice"
        locked_ids = set()
        for node in rc.nodes():
            assert len(node.key) == len(node.value) and len(node.key) % bs == 0
            ids = [s // bs for s in node.value[::bs]]
            if node.lock_ref == 0:
                for bid in ids:  # an unlocked tree block is held by the tree alone
                    assert m.block_pool.blocks[bid].ref_cnt == 1, f"unlocked tree block {bid} shared"
            else:
                locked_ids.update(ids)
        for bid in m.prefix.owned_block_ids():
            assert m.block_pool.blocks[bid].ref_cnt >= 1
        leaves = sorted(n for n in rc.nodes() if not n.children and n.lock_ref == 0)
        assert rc.evictable_leaves() == leaves, "evictable-leaf set out of date"


def state_of(m: KVCacheManager):
    """Everything an all-or-nothing operation must leave unchanged."""
    snap = m.snapshot()
    snap.pop("prefix_cache_stats")
    snap.pop("step")
    return snap


def check_learner_tree(m: KVCacheManager) -> None:
    """The radix slot's tree (lab 07's TreeNodes, one block id per element): its values are exactly the
    tree-owned blocks, each once, and an unlocked node's blocks are held by the tree alone."""
    stack, ids = [m.radix_cache.root], []
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        if node is not m.radix_cache.root:
            ids += node.value
            assert node.lock_ref > 0 or all(m.block_pool.blocks[b].ref_cnt == 1 for b in node.value)
    assert sorted(ids) == m.prefix.owned_block_ids(), "tree values != tree-owned blocks"
