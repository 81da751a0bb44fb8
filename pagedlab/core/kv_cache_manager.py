"""The KV-cache manager the scheduler talks to (as vLLM v1 ``vllm/v1/core/kv_cache_manager.py``).

It keeps each request's *block table* (``req_to_blocks``) and turns the scheduler's questions
into block-pool operations:

* ``get_computed_blocks`` - how much of this request is already cached? (lookup only)
* ``allocate_slots``      - give it room for ``num_new_tokens`` more tokens, all or nothing
* ``free``                - it finished or was preempted: give its blocks back, tail first

Beyond vLLM v1 it keeps two vLLM v0 features the course teaches: copy-on-write ``fork``
(parallel sampling, beam search; ``copy_on_write.py``) and swapping to a CPU pool (``swap.py``). The prefix cache is
either vLLM's hash chain (``prefix_cache="hash"``) or SGLang's radix tree (``"radix"``,
``radix_prefix.py``); both keep the same ``get_computed_blocks``/``allocate_slots``/``free``
contract.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core import hashing
from pagedlab.core.block_pool import BlockHash, BlockPool, FreeKVCacheBlockQueue, KVCacheBlock
from pagedlab.core.block_pool import distinct_blocks as _distinct
from pagedlab.core.copy_on_write import CopyOnWriteMixin
from pagedlab.core.radix_prefix import RadixPrefixMixin
from pagedlab.core.swap import SwapMixin
from pagedlab.errors import ConfigError
from pagedlab.request import Request
from pagedlab.trace import Tracer, _active


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


@dataclass
class PrefixCacheStats:
    """Prefix-cache results of the requests admitted since the last reset, in tokens.

    As vLLM's ``PrefixCacheStats`` (``vllm/v1/metrics/stats.py``, latest): counted once per
    admission, not per lookup (a request that does not fit is looked up again next step);
    re-admissions after a recompute preemption are counted apart, in the ``preempted_*`` fields.
    """

    requests: int = 0
    queries: int = 0
    hits: int = 0
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


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}, got {value!r}")


class KVCacheManager(CopyOnWriteMixin, RadixPrefixMixin, SwapMixin):
    """Block tables, prefix caching, copy-on-write fork and swap over one ``BlockPool``.

    Invariant: a block's ``ref_cnt`` equals the number of requests whose table contains it
    (each table counts once even if it lists the block twice, bug B10, docs/bugs.md#b10), plus one if the radix
    tree holds it.

    Args:
        block_size: tokens per block, >= 1.
        num_gpu_blocks: blocks in the device pool, >= 1.
        max_model_len: longest sequence in tokens; allocation beyond it raises.
        enable_caching: enable prefix caching.
        prefix_cache: ``"hash"`` (vLLM hash chain) or ``"radix"`` (SGLang radix tree).
        num_cpu_blocks: blocks of the CPU swap pool (vLLM v0 ``swap_space``), >= 0.
        hash_seed: seed of the chain root ``NONE_HASH``; None = the process's random root.
        tracer: optional ``pagedlab.trace.Tracer``.
        free_queue_factory: the free-queue slot, passed to ``BlockPool``.
        prefix_lookup: the prefix-lookup slot of the hash path (default ``find_longest_cache_hit``).

    Raises:
        ConfigError: a size is not a positive int, or ``prefix_cache`` is unknown.
    """

    def __init__(
        self,
        block_size: int,
        num_gpu_blocks: int,
        max_model_len: int,
        enable_caching: bool = False,
        prefix_cache: str = "hash",
        num_cpu_blocks: int = 0,
        hash_seed: int | None = None,
        tracer: Tracer | None = None,
        free_queue_factory: Callable[[list[KVCacheBlock]], FreeKVCacheBlockQueue] | None = None,
        prefix_lookup: PrefixLookup | None = None,
    ) -> None:
        _check_int("block_size", block_size, 1)
        _check_int("num_gpu_blocks", num_gpu_blocks, 1)
        _check_int("max_model_len", max_model_len, 1)
        _check_int("num_cpu_blocks", num_cpu_blocks, 0)
        if prefix_cache not in ("hash", "radix"):
            raise ConfigError(f"prefix_cache must be 'hash' or 'radix', got {prefix_cache!r}")
        self.block_size = block_size
        self.num_gpu_blocks = num_gpu_blocks
        self.max_model_len = max_model_len
        self.enable_caching = bool(enable_caching)
        self.prefix_cache = prefix_cache
        self.tracer = tracer
        self.use_hash = self.enable_caching and prefix_cache == "hash"
        self.use_radix = self.enable_caching and prefix_cache == "radix"
        # The radix tree caches by tokens, so the pool's hash map stays off in radix mode.
        self.block_pool = BlockPool(num_gpu_blocks, self.use_hash, tracer, free_queue_factory)
        # The prefix-lookup slot (``pagedlab.engine.components``): hash-chain walk of the hash path.
        self.prefix_lookup: PrefixLookup = prefix_lookup or find_longest_cache_hit
        self.none_hash = hashing.make_none_hash(hash_seed) if hash_seed is not None else hashing.NONE_HASH
        self.block_hasher = hashing.get_request_block_hasher(block_size, self.none_hash) if self.use_hash else None
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        # Blocks of each request already published to the hash map (vLLM ``num_cached_block``).
        self.num_cached_block: dict[str, int] = {}
        self._pending_copies: list[tuple[int, int]] = []
        self.prefix_cache_stats = PrefixCacheStats()
        self._init_radix()
        self._init_swap(num_cpu_blocks)

    @classmethod
    def from_config(
        cls,
        cache_config: CacheConfig,
        scheduler_config: SchedulerConfig,
        default_hash_seed: int | None = None,
        tracer: Tracer | None = None,
        free_queue_factory: Callable[[list[KVCacheBlock]], FreeKVCacheBlockQueue] | None = None,
        prefix_lookup: PrefixLookup | None = None,
    ) -> KVCacheManager:
        """The manager an engine (or the simulator) builds from its configs (shared by both).

        Args:
            cache_config: block size, pool sizes, prefix caching and its hash seed.
            scheduler_config: gives ``max_model_len``.
            default_hash_seed: the hash seed when ``cache_config.hash_seed`` is None.
            tracer, free_queue_factory, prefix_lookup: as the constructor's.

        Raises:
            ConfigError: as the constructor.
        """
        cc = cache_config
        return cls(
            block_size=cc.block_size,
            num_gpu_blocks=cc.num_gpu_blocks,
            max_model_len=scheduler_config.max_model_len,
            enable_caching=cc.enable_prefix_caching,
            prefix_cache=cc.prefix_cache,
            num_cpu_blocks=cc.num_cpu_blocks,
            hash_seed=cc.hash_seed if cc.hash_seed is not None else default_hash_seed,
            tracer=tracer,
            free_queue_factory=free_queue_factory,
            prefix_lookup=prefix_lookup,
        )

    # --- lookup -------------------------------------------------------------------------

    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """Longest cached prefix of ``request`` (as vLLM v1 ``get_computed_blocks``).

        Changes no reference counts (the radix tree may split a node and stamp access times, as
        SGLang's ``match_prefix``) and counts nothing: see ``record_prefix_cache_stats``. The hit
        is block-aligned, stops at the first miss, and covers at most ``num_tokens - 1`` tokens:
        the last token is always recomputed to get logits (if the prompt is an exact multiple of
        ``block_size`` its whole last block is recomputed).

        Returns:
            ``(blocks, num_computed_tokens)`` with ``num_computed_tokens == len(blocks) * block_size``.
        """
        if not self.enable_caching:
            return [], 0
        if self.use_hash:
            self._ensure_hashes(request)
            hits = self.prefix_lookup(
                list(request.block_hashes), self.block_pool.get_cached_block, request.num_tokens, self.block_size
            )
        else:
            max_blocks = (request.num_tokens - 1) // self.block_size
            hits, _ = self._radix_match(request, max_blocks * self.block_size)
        return hits, len(hits) * self.block_size

    def record_prefix_cache_stats(self, request: Request, hit_blocks: list[KVCacheBlock]) -> None:
        """Count one admission of ``request`` that hit ``hit_blocks`` (vLLM ``record_prefix_cache_stats``).

        The scheduler calls it once the request is admitted (its ``allocate_slots`` succeeded),
        so a lookup repeated while the request waits is not counted again. Records a
        ``cache_hit`` trace event. Does nothing when prefix caching is off.
        """
        if not self.enable_caching:
            return
        num_tokens = len(hit_blocks) * self.block_size
        st, preempted = self.prefix_cache_stats, request.num_preemptions > 0
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

    def _ensure_hashes(self, request: Request) -> None:
        # A request built without ``block_hasher`` gets its hashes topped up here, so a
        # forgotten hasher costs hits but never publishes a block under a missing hash.
        if self.block_hasher is not None and len(request.block_hashes) < request.num_tokens // self.block_size:
            request.block_hashes.extend(self.block_hasher(request))

    # --- allocation ---------------------------------------------------------------------
    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: list[KVCacheBlock] | None = None,
    ) -> list[KVCacheBlock] | None:
        """Make room for ``num_new_tokens`` tokens after the computed ones (as vLLM v1 ``allocate_slots``).

        Order (all-or-nothing): capacity check, counting hit blocks that sit in the free queue
        and blocks to copy-on-write; then touch the hits (before popping, so a hit is never
        evicted by this very allocation); then copy shared blocks the new tokens would write
        into (vLLM v0 CoW, the pair is queued for ``take_pending_copies``); then pop new blocks;
        then publish full blocks up to ``min(computed + new, num_tokens)`` (hash path).

        ``request.num_computed_tokens`` must be the tokens already in cache for this request;
        the caller advances it after a successful call. The table may change in place (CoW), so
        read ``get_block_ids`` afterwards rather than patching a copy.

        Args:
            request: the request.
            num_new_tokens: tokens to compute this step, >= 1.
            num_new_computed_tokens: prefix-hit tokens (from ``get_computed_blocks``).
            new_computed_blocks: the hit blocks (from ``get_computed_blocks``).

        Returns:
            The newly popped blocks (possibly empty), or None when the pool is too short
            (nothing changed).

        Raises:
            ValueError: ``num_new_tokens < 1``, the request is swapped out, the hit does not
                match the request, or the sequence would exceed ``max_model_len``.
        """
        rid = request.request_id
        hits = list(new_computed_blocks or [])
        req_blocks = self.req_to_blocks.get(rid, [])
        self._check_allocation(request, num_new_tokens, num_new_computed_tokens, hits, req_blocks)
        start = request.num_computed_tokens + num_new_computed_tokens
        end = start + num_new_tokens

        num_new_blocks = max(0, cdiv(end, self.block_size) - len(hits) - len(req_blocks))
        # Hit blocks still in the free queue are not free for this allocation.
        num_free_hits = sum(1 for b in hits if b.ref_cnt == 0)
        # Held blocks the new tokens write into that others share: copy them first.
        first, last = start // self.block_size, (end - 1) // self.block_size
        cow_idx = [i for i in range(first, min(last + 1, len(req_blocks))) if req_blocks[i].ref_cnt > 1]
        need = num_new_blocks + num_free_hits + len(cow_idx)

        radix_lock = self._radix_lock_hit(request, hits) if self.use_radix else None
        if need > self.block_pool.get_num_free_blocks() + self._num_evictable_blocks():
            if radix_lock is not None:
                self._radix_unlock(radix_lock)
            return None
        self._evict_until_free(need)

        self.block_pool.touch(hits, owner=rid)
        req_blocks = self.req_to_blocks.setdefault(rid, req_blocks)
        req_blocks.extend(hits)
        if radix_lock is not None:
            self._radix_on_hit(request, radix_lock)
        for i in cow_idx:
            self._copy_on_write(request, req_blocks, i)
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks, owner=rid)
        req_blocks.extend(new_blocks)

        if self.use_hash:
            self._publish_full_blocks(request, req_blocks, len(hits), end)
        return new_blocks

    def _check_allocation(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int,
        hits: list[KVCacheBlock],
        req_blocks: list[KVCacheBlock],
    ) -> None:
        """The argument checks of ``allocate_slots`` (before anything changes).

        Raises:
            ValueError: ``num_new_tokens`` is not an int >= 1, the request is swapped out, the hit
                does not match ``num_new_computed_tokens`` or the request already holds blocks, or
                the sequence would exceed ``max_model_len``.
        """
        if isinstance(num_new_tokens, bool) or not isinstance(num_new_tokens, int) or num_new_tokens < 1:
            raise ValueError(f"num_new_tokens must be an int >= 1, got {num_new_tokens!r}")
        rid = request.request_id
        if rid in self.req_to_cpu_blocks:
            raise ValueError(f"request {rid} is swapped out; swap_in before allocating")
        if num_new_computed_tokens != len(hits) * self.block_size:
            raise ValueError(
                f"num_new_computed_tokens={num_new_computed_tokens} does not match "
                f"{len(hits)} hit blocks of {self.block_size} tokens"
            )
        if hits and req_blocks:
            raise ValueError(f"request {rid} already holds blocks; prefix hits apply only to a new request")
        end = request.num_computed_tokens + num_new_computed_tokens + num_new_tokens
        if end > self.max_model_len:
            raise ValueError(f"request {rid}: {end} tokens exceed max_model_len={self.max_model_len}")

    def _publish_full_blocks(self, request: Request, req_blocks: list[KVCacheBlock], num_hits: int, end: int) -> None:
        """Hash path: publish the request's full blocks up to token ``min(end, num_tokens)``; the
        first ``num_cached_block + num_hits`` are already published."""
        rid = request.request_id
        self._ensure_hashes(request)
        num_cached = self.num_cached_block.get(rid, 0) + num_hits
        num_full = min(end, request.num_tokens) // self.block_size
        self.block_pool.cache_full_blocks(request, req_blocks, num_cached, num_full, self.block_size)
        self.num_cached_block[rid] = max(num_cached, num_full)

    # --- release ------------------------------------------------------------------------
    def free(self, request: Request) -> None:
        """Release every block of ``request``, tail first (as vLLM v1 ``KVCacheManager.free``).

        Freed blocks keep their hash (hash path) so a later request, or this one after
        preemption, can hit them; the tail of the chain enters the free queue first and is
        evicted first. In radix mode the request's computed full blocks are inserted into the
        tree instead (SGLang ``cache_finished_req``) and its lock is released. A swapped-out
        request's CPU blocks are released. Freeing a request that holds nothing is a no-op.
        """
        rid = request.request_id
        self._free_cpu_blocks(rid)
        blocks = self.req_to_blocks.pop(rid, None)
        self.num_cached_block.pop(rid, None)
        if blocks is None:
            self._radix_forget(rid)
            return
        # One reference per distinct block, whatever the table repeats (bug B10, docs/bugs.md#b10).
        to_free = self._radix_cache_finished(request, blocks) if self.use_radix else blocks
        self.block_pool.free_blocks(reversed(_distinct(to_free)), owner=rid)

    # --- accounting ---------------------------------------------------------------------
    def get_block_ids(self, request_id: str) -> list[int]:
        """The request's block table as block ids (empty if it holds none)."""
        return [b.block_id for b in self.req_to_blocks.get(request_id, ())]

    @property
    def num_free_blocks(self) -> int:
        """Blocks an allocation can use: the free queue plus, in radix mode, evictable tree blocks."""
        return self.block_pool.get_num_free_blocks() + self._num_evictable_blocks()

    @property
    def usage(self) -> float:
        """KV usage in [0, 1]: ``1 - num_free_blocks / num_gpu_blocks`` (cached-but-free counts free)."""
        return 1.0 - self.num_free_blocks / self.num_gpu_blocks

    def make_prefix_cache_stats(self) -> PrefixCacheStats:
        """Return the stats gathered since the last call and start new ones (as vLLM)."""
        stats, self.prefix_cache_stats = self.prefix_cache_stats, PrefixCacheStats()
        return stats

    def reset_prefix_cache(self) -> bool:
        """Drop all cached content; refused (False, nothing changes) while any request holds blocks."""
        if self.req_to_blocks:
            return False
        self._radix_reset()
        return self.block_pool.reset_prefix_cache()

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able state in the ``pagedlab.trace`` snapshot format, plus ``block_size``,
        ``req_to_blocks`` ({request_id: [block_id]}), ``swapped`` ({request_id: [cpu_block_id]}),
        ``pending_copies`` and ``prefix_cache_stats``."""
        snap = self.block_pool.snapshot()
        for rid, blocks in self.req_to_blocks.items():
            for b in _distinct(blocks):
                snap["blocks"][b.block_id]["owners"].append(rid)
        for bid in self._radix_owned_block_ids():
            snap["blocks"][bid]["owners"].append("radix")
            snap["blocks"][bid]["hashed"] = True
        for entry in snap["blocks"]:
            entry["owners"].sort()
        snap.update(
            step=self.tracer.step if self.tracer is not None else 0,
            block_size=self.block_size,
            req_to_blocks={rid: [b.block_id for b in blocks] for rid, blocks in self.req_to_blocks.items()},
            swapped={rid: [b.block_id for b in blocks] for rid, blocks in self.req_to_cpu_blocks.items()},
            cpu_blocks=self._cpu_snapshot(),
            pending_copies=[list(p) for p in self._pending_copies],
            prefix_cache_stats=asdict(self.prefix_cache_stats),
        )
        return snap
