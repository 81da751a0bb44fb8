"""Prefix-cache strategies of ``KVCacheManager``: none, vLLM's hash chain, SGLang's radix tree.

vLLM v1 (0.11) composes its ``KVCacheManager`` from a ``KVCacheCoordinator`` and one
``SingleTypeKVCacheManager`` per attention type, each talking to the shared ``BlockPool``; the
prefix cache is not a mixin but a collaborator with a small interface. pagedlab does the same:
the manager holds one :class:`PrefixCacheStrategy` and asks it, at fixed points of a request's
life, what is cached and what to keep:

=======================  ==========================================================================
method                   called by ``KVCacheManager`` ...
=======================  ==========================================================================
``lookup``               in ``get_computed_blocks`` (changes no reference count)
``lock_hit``             in ``allocate_slots``, before the capacity check (pins the hit)
``num_evictable_blocks`` in the capacity check and ``num_free_blocks``
``evict_until_free``     before popping blocks (``allocate_slots``, ``swap_in``)
``commit``               after a successful ``allocate_slots`` (hash: publish the full blocks)
``cache_finished``       in ``free`` (radix: insert; returns the blocks whose reference to drop)
``forget``               when a request leaves without caching (swap-out, nothing held)
``fork``                 in ``fork`` (the child shares the parent's cache state)
``recache``              after ``swap_in`` (hash: publish the full blocks again)
``owned_block_ids``      in ``snapshot`` (blocks the cache itself holds a reference to)
``reset``                in ``reset_prefix_cache``
``record``/``stats``     once per admission (vLLM ``PrefixCacheStats``)
=======================  ==========================================================================

The radix strategy runs on any :class:`RadixTree`: the kit's :class:`~pagedlab.core.radix_cache.RadixCache`
by default, or a learner's lab 07 functions behind the ``radix`` slot (``pagedlab.engine.components``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pagedlab.core import hashing
from pagedlab.core.block_pool import BlockHash, BlockPool, KVCacheBlock
from pagedlab.core.radix_cache import RadixCache
from pagedlab.request import Request
from pagedlab.trace import Tracer, _active

__all__ = [
    "PrefixCacheStats",
    "PrefixLookup",
    "find_longest_cache_hit",
    "PrefixCacheStrategy",
    "NoPrefixCache",
    "HashPrefixCache",
    "RadixPrefixCache",
    "RadixTree",
    "make_prefix_cache",
]


@dataclass
class PrefixCacheStats:
    """Prefix-cache results of the requests admitted since the last reset, in tokens.

    As vLLM's ``PrefixCacheStats`` (``vllm/v1/metrics/stats.py``, latest): counted once per
    admission, not per lookup (a request that does not fit is looked up again next step);
    re-admissions after a recompute preemption are counted apart, in the ``preempted_*`` fields.
    """

    #: Admissions of requests never preempted before.
    requests: int = 0
    #: Tokens of those requests at admission (``request.num_tokens``: the prompt).
    queries: int = 0
    #: Of ``queries``, the tokens found in the cache (whole blocks: ``len(hit_blocks) * block_size``).
    hits: int = 0
    #: ``requests``, ``queries`` and ``hits`` again for re-admissions after a recompute preemption,
    #: which find their own blocks again and would inflate the hit rate.
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    @property
    def hit_rate(self) -> float:
        """``hits / queries`` of first admissions (0.0 when nothing was queried)."""
        return self.hits / self.queries if self.queries else 0.0


#: The prefix-lookup slot: ``(block_hashes, get_cached_block, num_tokens, block_size) -> hit blocks``.
PrefixLookup = Callable[[list[BlockHash], Callable[[BlockHash], KVCacheBlock | None], int, int], list[KVCacheBlock]]


def find_longest_cache_hit(
    block_hashes: list[BlockHash],
    get_cached_block: Callable[[BlockHash], KVCacheBlock | None],
    num_tokens: int,
    block_size: int,
) -> list[KVCacheBlock]:
    """The longest block-aligned cached prefix (vLLM 0.11 ``FullAttentionManager.find_longest_cache_hit``).

    Walks the hash chain from the first block and stops at the first miss (a chained hash cannot
    hit after a miss). Covers at most ``num_tokens - 1`` tokens: the last token is always
    recomputed to get its logits, so a prompt of exactly ``k * block_size`` tokens hits at most
    ``k - 1`` blocks.

    Args:
        block_hashes: the request's full-block hashes, first block first.
        get_cached_block: hash -> a cached block or None (``BlockPool.get_cached_block``).
        num_tokens: the request's token count, >= 1.
        block_size: tokens per block, >= 1.

    Returns:
        The hit blocks, first block first (changes no state).
    """
    hits: list[KVCacheBlock] = []
    for block_hash in block_hashes[: (num_tokens - 1) // block_size]:
        block = get_cached_block(block_hash)
        if block is None:
            break  # chain property: nothing after a miss can hit
        hits.append(block)
    return hits


class PrefixCacheStrategy(ABC):
    """What ``KVCacheManager`` asks its prefix cache (see the module docstring for when).

    Args:
        block_pool: the device pool the cache publishes to / evicts from.
        block_size: tokens per block.
        tracer: optional tracer (``cache_hit``, ``cache``, ``evict`` events).
    """

    name = "none"

    def __init__(self, block_pool: BlockPool, block_size: int, tracer: Tracer | None) -> None:
        self.block_pool, self.block_size, self.tracer = block_pool, block_size, tracer
        self.stats = PrefixCacheStats()

    @property
    def enabled(self) -> bool:
        """Whether anything is cached at all (False only for :class:`NoPrefixCache`)."""
        return True

    @abstractmethod
    def lookup(self, request: Request) -> list[KVCacheBlock]:
        """The cached blocks of ``request``'s longest block-aligned prefix, covering at most
        ``num_tokens - 1`` tokens. Changes no reference count."""

    def lock_hit(self, request: Request, hits: list[KVCacheBlock]) -> None:
        """Pin ``hits`` for ``request`` so eviction cannot take them (undone by ``forget``).

        Raises:
            ValueError: the hit is stale (the cache changed since ``lookup``).
        """
        return None

    def num_evictable_blocks(self) -> int:
        """Blocks only the cache holds, which ``evict_until_free`` can free (0 unless radix)."""
        return 0

    def evict_until_free(self, num_blocks: int) -> None:
        """Evict until the free queue holds ``num_blocks`` (only radix holds blocks to evict)."""
        return None

    def commit(self, request: Request, req_blocks: list[KVCacheBlock], num_hits: int, end: int) -> None:
        """``allocate_slots`` succeeded: ``req_blocks`` hold tokens up to ``end``; ``num_hits`` came from the cache."""
        return None

    def cache_finished(self, request: Request, table: list[KVCacheBlock]) -> list[KVCacheBlock]:
        """``request`` is freed: keep what the cache wants; return the blocks whose reference the request drops."""
        self.forget(request.request_id)
        return table

    def forget(self, request_id: str) -> None:
        """``request_id`` leaves without caching anything (unlocks its hit, drops its bookkeeping)."""
        return None

    def fork(self, parent_id: str, child_id: str) -> None:
        """``child_id`` now shares ``parent_id``'s table: share its cache state too."""
        return None

    def recache(self, request: Request, table: list[KVCacheBlock]) -> None:
        """``request`` came back from swap with ``table``: publish its computed full blocks again."""
        return None

    def owned_block_ids(self) -> list[int]:
        """Blocks the cache itself holds a reference to, sorted."""
        return []

    def reset(self) -> None:
        """Drop every cached entry (the manager refuses while requests hold blocks)."""
        return None

    def record(self, request: Request, hit_blocks: list[KVCacheBlock]) -> None:
        """Count one admission of ``request`` that hit ``hit_blocks`` (vLLM ``record_prefix_cache_stats``)."""
        num_tokens = len(hit_blocks) * self.block_size
        st, preempted = self.stats, request.num_preemptions > 0
        if preempted:
            st.preempted_requests += 1
            st.preempted_queries += request.num_tokens
            st.preempted_hits += num_tokens
        else:
            st.requests += 1
            st.queries += request.num_tokens
            st.hits += num_tokens
        if _active(self.tracer):
            self.tracer.record(
                "cache_hit",
                request_id=request.request_id,
                block_ids=[b.block_id for b in hit_blocks],
                num_tokens=num_tokens,
                preempted=preempted,
            )


class NoPrefixCache(PrefixCacheStrategy):
    """Prefix caching off: nothing hits, nothing is kept, nothing is counted."""

    @property
    def enabled(self) -> bool:
        return False

    def lookup(self, request: Request) -> list[KVCacheBlock]:
        return []

    def record(self, request: Request, hit_blocks: list[KVCacheBlock]) -> None:
        return None


class HashPrefixCache(PrefixCacheStrategy):
    """vLLM v1's hash chain (0.11 ``BlockPool.cached_block_hash_to_block`` + ``FullAttentionManager``).

    Full blocks are published under their chained hash as soon as they are computed
    (``commit``); a freed block keeps its hash until the pool reuses it. The lookup is the
    ``prefix_lookup`` slot (default :func:`find_longest_cache_hit`).

    Args:
        none_hash: root of the chain.
        prefix_lookup: the lookup walking the chain.
    """

    name = "hash"

    def __init__(
        self,
        block_pool: BlockPool,
        block_size: int,
        tracer: Tracer | None,
        none_hash: BlockHash,
        prefix_lookup: PrefixLookup,
    ) -> None:
        super().__init__(block_pool, block_size, tracer)
        self.none_hash = none_hash
        self.prefix_lookup = prefix_lookup
        self.block_hasher = hashing.get_request_block_hasher(block_size, none_hash)
        # Blocks of each request already published to the hash map (vLLM ``num_cached_block``).
        self.num_cached_block: dict[str, int] = {}

    def ensure_hashes(self, request: Request) -> None:
        """Top up ``request.block_hashes`` (a request built without ``block_hasher`` costs hits,
        but never publishes a block under a missing hash)."""
        if len(request.block_hashes) < request.num_tokens // self.block_size:
            request.block_hashes.extend(self.block_hasher(request))

    def lookup(self, request: Request) -> list[KVCacheBlock]:
        self.ensure_hashes(request)
        return self.prefix_lookup(
            list(request.block_hashes), self.block_pool.get_cached_block, request.num_tokens, self.block_size
        )

    def commit(self, request: Request, req_blocks: list[KVCacheBlock], num_hits: int, end: int) -> None:
        """Publish the full blocks up to ``min(end, num_tokens)``; the first ``num_cached_block + num_hits``
        are published already."""
        rid = request.request_id
        self.ensure_hashes(request)
        num_cached = self.num_cached_block.get(rid, 0) + num_hits
        num_full = min(end, request.num_tokens) // self.block_size
        self.block_pool.cache_full_blocks(request, req_blocks, num_cached, num_full, self.block_size)
        self.num_cached_block[rid] = max(num_cached, num_full)

    def forget(self, request_id: str) -> None:
        self.num_cached_block.pop(request_id, None)

    def fork(self, parent_id: str, child_id: str) -> None:
        self.num_cached_block[child_id] = self.num_cached_block.get(parent_id, 0)

    def recache(self, request: Request, table: list[KVCacheBlock]) -> None:
        self.ensure_hashes(request)
        num_full = min(request.num_computed_tokens, request.num_tokens) // self.block_size
        self.block_pool.cache_full_blocks(request, table, 0, num_full, self.block_size)
        self.num_cached_block[request.request_id] = num_full


class RadixTree(Protocol):
    """The tree operations :class:`RadixPrefixCache` needs (SGLang 0.4.6 ``RadixCache``'s; the kit's
    :class:`~pagedlab.core.radix_cache.RadixCache` is one). Values are KV slot ids, one per token;
    keys are block-aligned."""

    def match_prefix(self, key: Sequence[int], extra_key: Hashable | None = None) -> tuple[list[int], Any]: ...
    def insert(
        self, key: Sequence[int], value: Sequence[int] | None = None, extra_key: Hashable | None = None
    ) -> int: ...
    def inc_lock_ref(self, node: Any) -> int: ...
    def dec_lock_ref(self, node: Any) -> int: ...
    def evict(self, num_tokens: int, evict_callback: Callable[[list[int]], Any]) -> int: ...
    def evictable_size(self) -> int: ...
    def reset(self) -> None: ...


class RadixPrefixCache(PrefixCacheStrategy):
    """SGLang's radix tree over a vLLM-style block pool (page size = ``block_size``).

    * The tree holds **one reference** to every block it stores, so its blocks are never in the
      free queue. A tree value is per token (SGLang), ``slot = block_id * block_size + offset``.
    * A request's matched path is **locked** while it runs; unlocked tree blocks are held by the
      tree alone, so evicting them really frees them. ``num_evictable_blocks`` counts them and
      ``evict_until_free`` evicts LRU leaves when the free queue runs short.
    * On ``cache_finished`` the request's computed full blocks are inserted (SGLang
      ``cache_finished_req``): the span already in the tree is a duplicate and is freed, the new
      suffix is adopted (the request's reference becomes the tree's), and the lock is released.
      Nothing is inserted mid-run, so an aborted or preempted chunked prefill leaves no tree
      reference to a block it still writes (bug B14, docs/bugs.md#b14).
    * A block shared with a fork sibling is adopted only by the last holder (its ``ref_cnt`` is 1),
      which keeps "unlocked tree block => held by the tree alone" true.

    Args:
        tree: the tree (default: a kit ``RadixCache(block_size)``).
    """

    name = "radix"

    def __init__(
        self, block_pool: BlockPool, block_size: int, tracer: Tracer | None, tree: RadixTree | None = None
    ) -> None:
        super().__init__(block_pool, block_size, tracer)
        self.tree: RadixTree = tree if tree is not None else RadixCache(block_size)
        self._node: dict[str, Any] = {}  # deepest locked node per running request
        self._tree_block_ids: set[int] = set()

    @staticmethod
    def _extra_key(request: Request) -> Any:
        # Same kind-tagged keys as the hash chain (bug B2, docs/bugs.md#b2), on every block: it namespaces a path.
        return hashing.generate_block_hash_extra_keys(request, 0)

    def _match(self, request: Request, num_tokens: int) -> tuple[list[KVCacheBlock], Any]:
        bs = self.block_size
        slots, node = self.tree.match_prefix(request.all_token_ids[:num_tokens], self._extra_key(request))
        return [self.block_pool.blocks[s // bs] for s in slots[::bs]], node

    def lookup(self, request: Request) -> list[KVCacheBlock]:
        return self._match(request, (request.num_tokens - 1) // self.block_size * self.block_size)[0]

    def lock_hit(self, request: Request, hits: list[KVCacheBlock]) -> None:
        if not hits:
            return
        blocks, node = self._match(request, len(hits) * self.block_size)
        if [b.block_id for b in blocks] != [b.block_id for b in hits]:
            raise ValueError(f"request {request.request_id}: prefix hit is stale; call get_computed_blocks again")
        self.tree.inc_lock_ref(node)
        self._node[request.request_id] = node

    def num_evictable_blocks(self) -> int:
        return self.tree.evictable_size() // self.block_size

    def evict_until_free(self, num_blocks: int) -> None:
        short = num_blocks - self.block_pool.get_num_free_blocks()
        if short > 0:
            self.tree.evict(short * self.block_size, self._evict_callback)

    def _evict_callback(self, slots: list[int]) -> None:
        blocks = [self.block_pool.blocks[s // self.block_size] for s in slots[:: self.block_size]]
        for b in blocks:
            self._tree_block_ids.discard(b.block_id)
        if _active(self.tracer):
            self.tracer.record("evict", block_ids=[b.block_id for b in blocks], cache="radix")
        # Deepest first, like a request's reverse free.
        self.block_pool.free_blocks(reversed(blocks), owner="radix")

    def cache_finished(self, request: Request, table: list[KVCacheBlock]) -> list[KVCacheBlock]:
        """Insert the request's computed full blocks; return the blocks whose reference it drops.

        As SGLang ``cache_finished_req``: blocks in the span the tree already had are released
        (duplicates, or the tree's own blocks the request had matched), the rest are adopted.
        """
        rid, bs = request.request_id, self.block_size
        node = self._node.pop(rid, None)
        ids = [b.block_id for b in table]
        n_full = min(request.num_computed_tokens, request.num_tokens, len(table) * bs) // bs
        k = 0
        if len(set(ids)) == len(ids):  # a table that repeats a block is never inserted
            while k < n_full and (table[k].block_id in self._tree_block_ids or table[k].ref_cnt == 1):
                k += 1
        present = 0
        if k:
            slots = [b.block_id * bs + j for b in table[:k] for j in range(bs)]
            present = self.tree.insert(request.all_token_ids[: k * bs], slots, self._extra_key(request)) // bs
        adopted = table[present:k]
        self._tree_block_ids.update(b.block_id for b in adopted)
        if adopted and _active(self.tracer):
            self.tracer.record("cache", block_ids=[b.block_id for b in adopted], owner="radix", from_owner=rid)
        if node is not None:
            self.tree.dec_lock_ref(node)
        return table[:present] + table[k:]

    def forget(self, request_id: str) -> None:
        node = self._node.pop(request_id, None)
        if node is not None:
            self.tree.dec_lock_ref(node)

    def fork(self, parent_id: str, child_id: str) -> None:
        # The child shares the parent's tree blocks, so it must pin them as well.
        node = self._node.get(parent_id)
        if node is not None:
            self.tree.inc_lock_ref(node)
            self._node[child_id] = node

    def owned_block_ids(self) -> list[int]:
        return sorted(self._tree_block_ids)

    def reset(self) -> None:
        self.tree.evict(self.tree.evictable_size(), self._evict_callback)
        self.tree.reset()


def make_prefix_cache(
    kind: str | None,
    block_pool: BlockPool,
    block_size: int,
    tracer: Tracer | None,
    none_hash: BlockHash,
    prefix_lookup: PrefixLookup | None = None,
    radix_tree_factory: Callable[[int], RadixTree] | None = None,
) -> PrefixCacheStrategy:
    """The strategy for ``kind`` (None = caching off, ``"hash"``, ``"radix"``).

    Args:
        prefix_lookup: the hash path's lookup (default :func:`find_longest_cache_hit`).
        radix_tree_factory: ``block_size -> tree`` for the radix path (default ``RadixCache``).

    Raises:
        ValueError: unknown ``kind``.
    """
    if kind is None:
        return NoPrefixCache(block_pool, block_size, tracer)
    if kind == "hash":
        return HashPrefixCache(block_pool, block_size, tracer, none_hash, prefix_lookup or find_longest_cache_hit)
    if kind == "radix":
        tree = radix_tree_factory(block_size) if radix_tree_factory is not None else None
        return RadixPrefixCache(block_pool, block_size, tracer, tree)
    raise ValueError(f"unknown prefix cache {kind!r} (expected None, 'hash' or 'radix')")
