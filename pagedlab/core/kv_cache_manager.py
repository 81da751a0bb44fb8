"""The KV-cache manager the scheduler talks to (as vLLM v1 ``vllm/v1/core/kv_cache_manager.py``).

It keeps each request's *block table* (``req_to_blocks``) and turns the scheduler's questions
into block-pool operations:

* ``get_computed_blocks`` - how much of this request is already cached? (lookup only)
* ``allocate_slots``      - give it room for ``num_new_tokens`` more tokens, all or nothing
* ``free``                - it finished or was preempted: give its blocks back, tail first

It is composed, as vLLM v1 composes ``KVCacheCoordinator`` and its managers, of collaborators
with small interfaces, each owning its state:

* ``block_pool``  - the device ``BlockPool`` (free queue, ref counts, hash map);
* ``prefix``      - a ``PrefixCacheStrategy`` (``prefix_cache.py``): none, vLLM's hash chain
  (``prefix_cache="hash"``) or SGLang's radix tree (``"radix"``), one contract for all three;
* ``cow``         - ``CopyOnWrite`` (``copy_on_write.py``): vLLM v0's fork for parallel sampling and
  beam search, and the queue of pending KV copies;
* ``swap_space``  - ``SwapSpace`` (``swap.py``): vLLM v0's CPU pool for swap preemption.

The manager owns the block tables (``req_to_blocks``) and orders the calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core import hashing
from pagedlab.core.block_pool import BlockHash, BlockPool, FreeKVCacheBlockQueue, KVCacheBlock
from pagedlab.core.block_pool import distinct_blocks as _distinct
from pagedlab.core.copy_on_write import CopyOnWrite
from pagedlab.core.prefix_cache import (
    HashPrefixCache,
    PrefixCacheStats,
    PrefixCacheStrategy,
    PrefixLookup,
    RadixPrefixCache,
    RadixTree,
    find_longest_cache_hit,
    make_prefix_cache,
)
from pagedlab.core.swap import SwapSpace
from pagedlab.errors import ConfigError, InvalidRequestError
from pagedlab.request import Request
from pagedlab.trace import Tracer, _active

__all__ = ["KVCacheManager", "PrefixCacheStats", "PrefixLookup", "cdiv", "find_longest_cache_hit"]


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}, got {value!r}")


class KVCacheManager:
    """Block tables over one ``BlockPool``, with a prefix-cache strategy, copy-on-write and swap.

    Invariant: a block's ``ref_cnt`` equals the number of requests whose table contains it
    (each table counts once even if it lists the block twice, bug B10, docs/bugs.md#b10), plus one
    if the prefix cache holds it (``prefix.owned_block_ids()``, radix only).

    Args:
        block_size: tokens per block, >= 1.
        num_gpu_blocks: blocks in the device pool, >= 1.
        max_model_len: longest sequence in tokens; allocation beyond it raises.
        enable_caching: enable prefix caching.
        prefix_cache: ``"hash"`` (vLLM hash chain) or ``"radix"`` (SGLang radix tree).
        num_cpu_blocks: blocks of the CPU swap pool (vLLM v0 ``swap_space``), >= 0.
        hash_seed: seed of the chain root ``NONE_HASH``; None = the process's random root.
        tracer: optional ``pagedlab.trace.Tracer``.
        free_queue_factory: builds the free queue, passed to ``BlockPool``.
        prefix_lookup: the hash path's lookup (default ``find_longest_cache_hit``).
        radix_tree_factory: ``block_size -> RadixTree`` (default the kit's ``RadixCache``).
        cow_factory: ``(block_pool, block_size, tracer) -> CopyOnWrite`` (default ``CopyOnWrite``).

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
        radix_tree_factory: Callable[[int], RadixTree] | None = None,
        cow_factory: Callable[[BlockPool, int, Tracer | None], CopyOnWrite] = CopyOnWrite,
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
        kind = prefix_cache if self.enable_caching else None
        # The radix tree caches by tokens, so the pool's hash map stays off in radix mode.
        self.block_pool = BlockPool(num_gpu_blocks, kind == "hash", tracer, free_queue_factory)
        self.none_hash = hashing.make_none_hash(hash_seed) if hash_seed is not None else hashing.NONE_HASH
        self.prefix: PrefixCacheStrategy = make_prefix_cache(
            kind, self.block_pool, block_size, tracer, self.none_hash, prefix_lookup, radix_tree_factory
        )
        self.cow = cow_factory(self.block_pool, block_size, tracer)
        self.swap_space = SwapSpace(num_cpu_blocks, block_size, self.block_pool, tracer)
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}

    # --- the collaborators' state, under the names the rest of the kit reads ----------------
    @property
    def use_hash(self) -> bool:
        """Prefix caching with vLLM's hash chain."""
        return self.prefix.name == "hash"

    @property
    def use_radix(self) -> bool:
        """Prefix caching with SGLang's radix tree."""
        return self.prefix.name == "radix"

    @property
    def block_hasher(self) -> Callable[[Request], list[BlockHash]] | None:
        """The hasher to build requests with (hash path), else None."""
        return self.prefix.block_hasher if isinstance(self.prefix, HashPrefixCache) else None

    @property
    def radix_cache(self) -> RadixTree | None:
        """The radix tree (radix path), else None."""
        return self.prefix.tree if isinstance(self.prefix, RadixPrefixCache) else None

    @property
    def num_cpu_blocks(self) -> int:
        return self.swap_space.num_cpu_blocks

    @property
    def cpu_block_pool(self) -> BlockPool | None:
        return self.swap_space.cpu_block_pool

    @property
    def req_to_cpu_blocks(self) -> dict[str, list[KVCacheBlock]]:
        """Swapped-out requests' CPU block tables."""
        return self.swap_space.req_to_cpu_blocks

    @property
    def prefix_cache_stats(self) -> PrefixCacheStats:
        return self.prefix.stats

    @classmethod
    def from_config(
        cls,
        cache_config: CacheConfig,
        scheduler_config: SchedulerConfig,
        default_hash_seed: int | None = None,
        tracer: Tracer | None = None,
        **parts: Any,
    ) -> KVCacheManager:
        """The manager an engine (or the simulator) builds from its configs (shared by both).

        Args:
            cache_config: block size, pool sizes, prefix caching and its hash seed.
            scheduler_config: gives ``max_model_len``.
            default_hash_seed: the hash seed when ``cache_config.hash_seed`` is None.
            tracer: as the constructor's.
            parts: the constructor's ``free_queue_factory``, ``prefix_lookup``, ``radix_tree_factory``
                and ``cow_factory``, passed on.

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
            **parts,
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
        hits = self.prefix.lookup(request)
        return hits, len(hits) * self.block_size

    def record_prefix_cache_stats(self, request: Request, hit_blocks: list[KVCacheBlock]) -> None:
        """Count one admission of ``request`` that hit ``hit_blocks`` (vLLM ``record_prefix_cache_stats``).

        The scheduler calls it once the request is admitted (its ``allocate_slots`` succeeded),
        so a lookup repeated while the request waits is not counted again. Records a
        ``cache_hit`` trace event. Does nothing when prefix caching is off.
        """
        self.prefix.record(request, hit_blocks)

    # --- allocation ---------------------------------------------------------------------
    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: list[KVCacheBlock] | None = None,
        watermark_blocks: int = 0,
        full_sequence_must_fit: bool = False,
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
            watermark_blocks: blocks that must stay free after this allocation (vLLM 0.32
                ``required_blocks = num_blocks_to_allocate + watermark_blocks``); the scheduler
                passes them only when admitting a waiting request next to running ones.
            full_sequence_must_fit: refuse (return None) unless blocks for the request's whole
                known sequence, ``min(request.num_tokens, max_model_len)`` tokens, fit too, not
                only this chunk's (vLLM 0.32.0 ``vllm/v1/core/kv_cache_manager.py:522-538``; the
                scheduler passes ``SchedulerConfig.scheduler_reserve_full_isl`` when admitting).
                See ``_num_blocks_for_full_sequence``.

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
        cow_idx = self.cow.shared_targets(req_blocks, start, end)
        need = num_new_blocks + num_free_hits + len(cow_idx)

        if full_sequence_must_fit:
            need_full = self._num_blocks_for_full_sequence(request, hits, req_blocks, num_free_hits + len(cow_idx))
        else:
            need_full = 0
        self.prefix.lock_hit(request, hits)
        if max(need, need_full) + watermark_blocks > self.num_free_blocks:
            if hits:  # undo this call's lock only: a request that holds blocks keeps the lock of its earlier hit
                self.prefix.forget(rid)
            return None
        self.prefix.evict_until_free(need)

        self.block_pool.touch(hits, owner=rid)
        req_blocks = self.req_to_blocks.setdefault(rid, req_blocks)
        req_blocks.extend(hits)
        new_blocks = self.cow.extend(rid, req_blocks, (start, end), cow_idx, num_new_blocks)
        self.prefix.commit(request, req_blocks, len(hits), end)
        return new_blocks

    def _num_blocks_for_full_sequence(
        self, request: Request, hits: list[KVCacheBlock], req_blocks: list[KVCacheBlock], num_taken_blocks: int
    ) -> int:
        """Blocks the request's whole known sequence still needs: the admission check of
        ``full_sequence_must_fit`` (vLLM 0.32.0 ``vllm/v1/core/kv_cache_manager.py:522-538``).

        vLLM counts ``cdiv(min(request.num_tokens, max_model_len), block_size)`` blocks, less the
        blocks the request holds and its prefix hits, plus the hits that sit in the free queue
        (``SingleTypeKVCacheManager.get_num_blocks_to_allocate``,
        ``vllm/v1/core/single_type_kv_cache_manager.py:213-267``; touching them takes them out of
        the free queue). ``apply_admission_cap`` clamps only sliding-window / chunked-local
        layers and ``prefill_end`` matters only to Mamba, so neither changes this count for the
        kit's full-attention layers. ``request.num_tokens`` is the prompt for a new request and
        prompt + generated tokens for a recompute-preempted one being resumed; tokens it may
        still generate are not reserved. ``num_taken_blocks`` (free-queue hits and, a kit
        extension vLLM v1 lacks, copy-on-write targets) is counted as in the chunk's check.
        """
        full_num_tokens = min(request.num_tokens, self.max_model_len)
        held = len(hits) + len(req_blocks)
        return max(0, cdiv(full_num_tokens, self.block_size) - held) + num_taken_blocks

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
        if rid in self.swap_space.req_to_cpu_blocks:
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
        self.swap_space.free(rid)
        blocks = self.req_to_blocks.pop(rid, None)
        if blocks is None:
            self.prefix.forget(rid)
            return
        # One reference per distinct block, whatever the table repeats (bug B10, docs/bugs.md#b10).
        to_free = self.prefix.cache_finished(request, blocks)
        self.block_pool.free_blocks(reversed(_distinct(to_free)), owner=rid)

    # --- accounting ---------------------------------------------------------------------
    def get_block_ids(self, request_id: str) -> list[int]:
        """The request's block table as block ids (empty if it holds none)."""
        return [b.block_id for b in self.req_to_blocks.get(request_id, ())]

    @property
    def num_free_blocks(self) -> int:
        """Blocks an allocation can use: the free queue plus, in radix mode, evictable tree blocks."""
        return self.block_pool.get_num_free_blocks() + self.prefix.num_evictable_blocks()

    @property
    def usage(self) -> float:
        """KV usage in [0, 1]: ``1 - num_free_blocks / num_gpu_blocks`` (cached-but-free counts free)."""
        return 1.0 - self.num_free_blocks / self.num_gpu_blocks

    def make_prefix_cache_stats(self) -> PrefixCacheStats:
        """Return the stats gathered since the last call and start new ones (as vLLM)."""
        stats, self.prefix.stats = self.prefix.stats, PrefixCacheStats()
        return stats

    def reset_prefix_cache(self) -> bool:
        """Drop all cached content; refused (False, nothing changes) while any request holds blocks."""
        if self.req_to_blocks:
            return False
        self.prefix.reset()
        return self.block_pool.reset_prefix_cache()

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able state in the ``pagedlab.trace`` snapshot format, plus ``block_size``,
        ``req_to_blocks`` ({request_id: [block_id]}), ``swapped`` ({request_id: [cpu_block_id]}),
        ``pending_copies`` and ``prefix_cache_stats``."""
        snap = self.block_pool.snapshot()
        for rid, blocks in self.req_to_blocks.items():
            for b in _distinct(blocks):
                snap["blocks"][b.block_id]["owners"].append(rid)
        for bid in self.prefix.owned_block_ids():
            snap["blocks"][bid]["owners"].append("radix")
            snap["blocks"][bid]["hashed"] = True
        for entry in snap["blocks"]:
            entry["owners"].sort()
        snap.update(
            step=self.tracer.step if self.tracer is not None else 0,
            block_size=self.block_size,
            req_to_blocks={rid: [b.block_id for b in blocks] for rid, blocks in self.req_to_blocks.items()},
            swapped={rid: [b.block_id for b in blocks] for rid, blocks in self.req_to_cpu_blocks.items()},
            cpu_blocks=self.swap_space.snapshot(),
            pending_copies=[list(p) for p in self.cow.pending_copies],
            prefix_cache_stats=asdict(self.prefix_cache_stats),
        )
        return snap

    # --- fork and copy-on-write (``self.cow``) ---------------------------------------------
    def fork(self, parent_request: Request, child_request: Request) -> None:
        """Share ``parent_request``'s blocks with ``child_request`` (vLLM v0 ``BlockSpaceManager.fork``).

        Adds one reference per *distinct* block (bug B10, docs/bugs.md#b10) and allocates nothing; the child
        gets a copy of the parent's table and ``num_computed_tokens``. The first write of either
        into a shared block copies it (see ``allocate_slots``). vLLM v1 dropped this: it fans
        ``n > 1`` out into independent requests that share only full blocks via prefix caching.

        Raises:
            InvalidRequestError: the parent is finished, swapped out or holds no blocks; the
                child already holds blocks; or the child's tokens differ from the parent's
                computed ones. Nothing changes.
        """
        pid, cid = parent_request.request_id, child_request.request_id
        swapped = self.swap_space.req_to_cpu_blocks
        if parent_request.is_finished():
            raise InvalidRequestError(f"cannot fork finished request {pid}")
        if pid in swapped:
            raise InvalidRequestError(f"cannot fork swapped-out request {pid}")
        if pid not in self.req_to_blocks:
            raise InvalidRequestError(f"cannot fork request {pid}: it holds no blocks")
        if cid in self.req_to_blocks or cid in swapped or cid == pid:
            raise InvalidRequestError(f"fork child {cid} already holds blocks")
        n = parent_request.num_computed_tokens
        if child_request.all_token_ids[:n] != parent_request.all_token_ids[:n]:
            raise InvalidRequestError(f"fork child {cid} does not start with parent {pid}'s computed tokens")
        blocks = self.req_to_blocks[pid]
        self.req_to_blocks[cid] = self.cow.fork_table(pid, blocks, n, cid)
        child_request.num_computed_tokens = n
        self.prefix.fork(pid, cid)
        if _active(self.tracer):
            self.tracer.record("fork", parent=pid, child=cid, block_ids=[b.block_id for b in _distinct(blocks)])

    def take_pending_copies(self) -> list[tuple[int, int]]:
        """Return and clear the ``(src_block_id, dst_block_id)`` copies queued by CoW.

        The engine must copy the KV of every pair, in order, before the next forward pass.
        """
        return self.cow.take_pending_copies()

    def num_held_blocks(self) -> int:
        """Distinct blocks referenced by requests (shared blocks count once)."""
        return len({b.block_id for blocks in self.req_to_blocks.values() for b in blocks})

    def num_blocks_without_sharing(self) -> int:
        """Blocks the same requests would need if nothing were shared (sum of table lengths)."""
        return sum(len(_distinct(blocks)) for blocks in self.req_to_blocks.values())

    # --- swap (``self.swap_space``) ----------------------------------------------------------
    def can_swap_out(self, requests: Sequence[Request]) -> bool:
        """True when the CPU pool can take every distinct GPU block of the group (``SwapSpace.can_swap_out``)."""
        return self.swap_space.can_swap_out(requests, self.req_to_blocks)

    def swap_out(self, requests: Sequence[Request]) -> list[tuple[int, int]]:
        """Move the group's blocks to the CPU pool; ``[(gpu_block_id, cpu_block_id)]`` (``SwapSpace.swap_out``).

        Raises:
            InvalidRequestError: a request holds no GPU blocks or appears twice.
            NoFreeBlocksError: the CPU pool is too small (nothing changes).
        """
        return self.swap_space.swap_out(requests, self.req_to_blocks, self.prefix)

    def can_swap_in(self, requests: Sequence[Request]) -> bool:
        """True when the GPU pool can take the group back plus decode headroom (``SwapSpace.can_swap_in``)."""
        return self.swap_space.can_swap_in(requests, self.num_free_blocks)

    def swap_in(self, requests: Sequence[Request]) -> list[tuple[int, int]]:
        """Move the group's blocks back to fresh GPU blocks; ``[(cpu_block_id, gpu_block_id)]`` (``SwapSpace.swap_in``).

        Raises:
            InvalidRequestError: a request is not swapped out or appears twice.
            NoFreeBlocksError: ``can_swap_in`` is False (nothing changes).
        """
        return self.swap_space.swap_in(requests, self.req_to_blocks, self.prefix)
