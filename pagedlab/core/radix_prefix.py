"""The radix tree as ``KVCacheManager``'s prefix cache (``prefix_cache="radix"``).

How SGLang's ownership model maps onto a vLLM-style block pool (page size = ``block_size``):

* The tree holds **one reference** to every block it stores, so its blocks are never in the
  free queue. A tree value is per token (SGLang), ``slot = block_id * block_size + offset``.
* A request's matched path is **locked** while it runs (``inc_lock_ref``); unlocked tree blocks
  are held by the tree alone, so evicting them really frees them. ``num_free_blocks`` counts
  them as free, and ``allocate_slots`` evicts LRU leaves when the free queue runs short.
* On ``free`` the request's computed full blocks are inserted (SGLang ``cache_finished_req``):
  the span already in the tree is a duplicate and is freed, the new suffix is adopted (the
  request's reference becomes the tree's), and the lock is released. Nothing is inserted
  mid-run, so an aborted or preempted chunked prefill leaves no tree reference to a block it
  still writes (bug B14, docs/bugs.md#b14).
* A block shared with a fork sibling is adopted only by the last holder (its ``ref_cnt`` is 1),
  which keeps "unlocked tree block => held by the tree alone" true.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pagedlab.core.hashing import generate_block_hash_extra_keys
from pagedlab.core.radix_cache import RadixCache, TreeNode
from pagedlab.trace import _active

if TYPE_CHECKING:
    from pagedlab.core.block_pool import BlockPool, KVCacheBlock
    from pagedlab.request import Request
    from pagedlab.trace import Tracer


class RadixPrefixMixin:
    """Radix-tree half of ``KVCacheManager`` (a no-op unless ``use_radix``)."""

    # State owned by ``KVCacheManager``, declared here for the type checker.
    block_size: int
    use_radix: bool
    block_pool: BlockPool
    tracer: Tracer | None

    def _tree(self) -> RadixCache:
        """The radix tree; only called in radix mode."""
        assert self.radix_cache is not None, "radix tree used while prefix_cache != 'radix'"
        return self.radix_cache

    def _init_radix(self) -> None:
        self.radix_cache: RadixCache | None = RadixCache(self.block_size) if self.use_radix else None
        # Deepest locked node per running request.
        self._radix_node: dict[str, TreeNode] = {}
        self._tree_block_ids: set[int] = set()

    def _radix_extra_key(self, request: Request) -> Any:
        # Same kind-tagged keys as the hash chain (bug B2, docs/bugs.md#b2), but on every block: it namespaces a path.
        keys = generate_block_hash_extra_keys(request, 0)
        return keys

    def _radix_match(self, request: Request, num_tokens: int) -> tuple[list[KVCacheBlock], TreeNode]:
        bs = self.block_size
        slots, node = self._tree().match_prefix(request.all_token_ids[:num_tokens], self._radix_extra_key(request))
        return [self.block_pool.blocks[s // bs] for s in slots[::bs]], node

    def _radix_lock_hit(self, request: Request, hits: list[KVCacheBlock]) -> TreeNode | None:
        """Re-match the hit and lock it, so the capacity check cannot count it as evictable."""
        if not hits:
            return None
        blocks, node = self._radix_match(request, len(hits) * self.block_size)
        if [b.block_id for b in blocks] != [b.block_id for b in hits]:
            raise ValueError(f"request {request.request_id}: prefix hit is stale; call get_computed_blocks again")
        self._tree().inc_lock_ref(node)
        return node

    def _radix_unlock(self, node: TreeNode) -> None:
        self._tree().dec_lock_ref(node)

    def _radix_on_hit(self, request: Request, node: TreeNode) -> None:
        self._radix_node[request.request_id] = node

    def _num_evictable_blocks(self) -> int:
        if not self.use_radix:
            return 0
        return self._tree().evictable_size() // self.block_size

    def _evict_until_free(self, num_blocks: int) -> None:
        """Evict unlocked leaves until the free queue holds ``num_blocks`` (radix mode only)."""
        if not self.use_radix:
            return
        short = num_blocks - self.block_pool.get_num_free_blocks()
        if short > 0:
            self._tree().evict(short * self.block_size, self._radix_evict_callback)

    def _radix_evict_callback(self, slots: list[int]) -> None:
        blocks = [self.block_pool.blocks[s // self.block_size] for s in slots[:: self.block_size]]
        for b in blocks:
            self._tree_block_ids.discard(b.block_id)
        if _active(self.tracer):
            self.tracer.record("evict", block_ids=[b.block_id for b in blocks], cache="radix")
        # Deepest first, like a request's reverse free.
        self.block_pool.free_blocks(reversed(blocks), owner="radix")

    def _radix_cache_finished(self, request: Request, table: list[KVCacheBlock]) -> list[KVCacheBlock]:
        """Insert the request's computed full blocks; return the blocks whose reference it drops.

        As SGLang ``cache_finished_req``: blocks in the span the tree already had are released
        (duplicates, or the tree's own blocks the request had matched), the rest are adopted.
        """
        rid, bs = request.request_id, self.block_size
        node = self._radix_node.pop(rid, None)
        ids = [b.block_id for b in table]
        n_full = min(request.num_computed_tokens, request.num_tokens, len(table) * bs) // bs
        k = 0
        if len(set(ids)) == len(ids):  # a table that repeats a block is never inserted
            while k < n_full and (table[k].block_id in self._tree_block_ids or table[k].ref_cnt == 1):
                k += 1
        present = 0
        if k:
            slots = [b.block_id * bs + j for b in table[:k] for j in range(bs)]
            present = self._tree().insert(request.all_token_ids[: k * bs], slots, self._radix_extra_key(request)) // bs
        adopted = table[present:k]
        for b in adopted:
            self._tree_block_ids.add(b.block_id)
        if adopted and _active(self.tracer):
            self.tracer.record("cache", block_ids=[b.block_id for b in adopted], owner="radix", from_owner=rid)
        if node is not None:
            self._tree().dec_lock_ref(node)
        return table[:present] + table[k:]

    def _radix_forget(self, request_id: str) -> None:
        """Release a request's lock without inserting anything (swap-out, or nothing held)."""
        node = self._radix_node.pop(request_id, None)
        if node is not None:
            self._tree().dec_lock_ref(node)

    def _radix_fork(self, parent_id: str, child_id: str) -> None:
        # The child shares the parent's tree blocks, so it must pin them as well.
        node = self._radix_node.get(parent_id)
        if node is not None:
            self._tree().inc_lock_ref(node)
            self._radix_node[child_id] = node

    def _radix_owned_block_ids(self) -> list[int]:
        return sorted(self._tree_block_ids)

    def _radix_reset(self) -> None:
        if self.use_radix:
            self._tree().evict(self._tree().evictable_size(), self._radix_evict_callback)
            self._tree().reset()
