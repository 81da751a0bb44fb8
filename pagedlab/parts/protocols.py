"""The interface of each slot (a ``typing.Protocol``); the kit's implementation of each lives with
the code it belongs to (``pagedlab.parts.slots.SLOTS`` names it)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

import torch

from pagedlab.core.block_pool import BlockHash, KVCacheBlock
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request

__all__ = [
    "FreeQueue",
    "SlotMappingFn",
    "ScheduleStepFn",
    "PickVictimFn",
    "PrefixLookupFn",
    "KVTileLoadFn",
    "PreemptRetryFn",
]


class FreeQueue(Protocol):
    """The free-block queue of lab 02 (vLLM 0.32.0 ``FreeKVCacheBlockQueue``): built from the initial
    blocks (front first), links threaded through ``prev_free_block`` / ``next_free_block``. The block
    pool appends freed blocks that carry a hash and ``prepend_n``s the others (vLLM 0.11's had no
    ``prepend_n``: every freed block was appended)."""

    num_free_blocks: int

    def popleft(self) -> KVCacheBlock: ...
    def remove(self, block: KVCacheBlock) -> None: ...
    def append(self, block: KVCacheBlock) -> None: ...
    def prepend_n(self, blocks: list[KVCacheBlock]) -> None: ...
    def get_all_free_blocks(self) -> list[KVCacheBlock]: ...


class SlotMappingFn(Protocol):
    """Lab 02: ``(block_table, positions, block_size) -> one flat KV slot per position``."""

    def __call__(self, block_table: list[int], positions: list[int], block_size: int) -> list[int]: ...


class ScheduleStepFn(Protocol):
    """Labs 04/05: one continuous-batching step under a token budget (vLLM 0.11 ``Scheduler.schedule``
    without preemption). Moves admitted requests from ``waiting`` (a deque) to ``running``, calls
    ``kv_cache_manager.allocate_slots`` for every scheduled request, returns ``{request_id: tokens}``."""

    def __call__(
        self,
        running: list[Request],
        waiting: deque[Request],
        kv_cache_manager: KVCacheManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        long_prefill_token_threshold: int,
    ) -> dict[str, int]: ...


class PickVictimFn(Protocol):
    """Lab 06: the running request to preempt under ``policy`` ("fcfs" | "priority"); ``running`` unchanged."""

    def __call__(self, running: list[Request], policy: str) -> Request: ...


class PrefixLookupFn(Protocol):
    """Lab 07 (vLLM 0.11 ``find_longest_cache_hit``): the cached blocks of the longest block-aligned
    prefix, walking the hash chain, covering at most ``num_tokens - 1`` tokens."""

    def __call__(
        self,
        block_hashes: list[BlockHash],
        get_cached_block: Callable[[BlockHash], KVCacheBlock | None],
        num_tokens: int,
        block_size: int,
    ) -> list[KVCacheBlock]: ...


class KVTileLoadFn(Protocol):
    """Lab 08: ``(cache, block_table, tile_start, tile_size, seq_len) -> (rows, mask)``; rows
    ``[tile_size, num_kv_heads, head_dim]`` (zeros where masked), mask ``[tile_size]`` bool."""

    def __call__(
        self, cache: torch.Tensor, block_table: torch.Tensor, tile_start: int, tile_size: int, seq_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


class PreemptRetryFn(Protocol):
    """The preempt-and-retry loop: allocate for ``request``, preempting victims (``preempt(victim)``)
    until ``allocate()`` succeeds or ``request`` itself was preempted; returns whether ``request`` got
    its slots (the scheduler's running phase calls it; the kit's is ``sched.scheduler.preempt_and_retry``).
    Lab 06's exercise writes this loop inside a whole step (``06.schedule_with_preemption``, which covers this slot); a function of this
    shape can also be plugged in alone."""

    def __call__(
        self,
        request: Request,
        allocate: Callable[[], bool],
        choose_victim: Callable[[], Request],
        preempt: Callable[[Request], None],
    ) -> bool: ...
