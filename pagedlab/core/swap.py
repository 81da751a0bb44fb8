"""Swap preemption between the GPU pool and a CPU pool (vLLM v0 ``BlockSpaceManager.swap_out``/
``swap_in``; vLLM v1 has no swap and always recomputes).

A *group* is a list of requests that may share blocks, e.g. the fork siblings of one
``SamplingParams(n>1)`` prompt. Sharing is preserved: a block held by several members moves
once and its CPU copy keeps the same reference count. A block also held outside the group (a
sibling left running, another request's prefix hit, the radix tree) is copied to CPU and the
group just drops its references on the GPU. Both directions return the block-id mapping; the
engine moves the KV data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pagedlab.core.block_pool import BlockPool, KVCacheBlock, distinct_blocks
from pagedlab.errors import InvalidRequestError, NoFreeBlocksError
from pagedlab.trace import _active

if TYPE_CHECKING:
    from pagedlab.core.prefix_cache import PrefixCacheStrategy
    from pagedlab.request import Request
    from pagedlab.trace import Tracer


def _distinct_blocks(tables: Sequence[list[KVCacheBlock]]) -> list[KVCacheBlock]:
    return distinct_blocks(b for table in tables for b in table)


class SwapSpace:
    """The CPU swap pool and the swapped-out block tables, owned by ``KVCacheManager``.

    The GPU side is passed in explicitly: the device ``BlockPool`` at construction, and each
    call's ``req_to_blocks`` (the manager's tables) and ``prefix`` (the manager's prefix-cache
    strategy, told when a request leaves or comes back).

    Args:
        num_cpu_blocks: blocks of the CPU pool (0 = no swapping).
        block_size: tokens per block.
        block_pool: the device pool.
        tracer: optional tracer (``swap_out``/``swap_in``/``free`` events).
    """

    def __init__(self, num_cpu_blocks: int, block_size: int, block_pool: BlockPool, tracer: Tracer | None) -> None:
        self.num_cpu_blocks = num_cpu_blocks
        self.block_size = block_size
        self.block_pool = block_pool
        self.tracer = tracer
        # The CPU pool needs no hashing and no tracer: swap events carry its state.
        self.cpu_block_pool = BlockPool(num_cpu_blocks, False) if num_cpu_blocks else None
        self.req_to_cpu_blocks: dict[str, list[KVCacheBlock]] = {}

    def _cpu_pool(self) -> BlockPool:
        """The CPU swap pool; callers check ``num_cpu_blocks`` (or a request's CPU table) first."""
        assert self.cpu_block_pool is not None, "no CPU swap pool (num_cpu_blocks=0)"
        return self.cpu_block_pool

    def _check_group(self, requests: Sequence[Request], where: dict[str, Any], what: str) -> None:
        ids = [r.request_id for r in requests]
        if not ids or len(set(ids)) != len(ids):
            raise InvalidRequestError(f"{what}: need a non-empty group of distinct requests, got {ids}")
        for rid in ids:
            if rid not in where:
                raise InvalidRequestError(f"{what}: request {rid} holds no blocks there")

    def can_swap_out(self, requests: Sequence[Request], req_to_blocks: dict[str, list[KVCacheBlock]]) -> bool:
        """True when the CPU pool can take every distinct GPU block (tables in ``req_to_blocks``) of the group."""
        if self.cpu_block_pool is None:
            return False
        tables = [req_to_blocks.get(r.request_id, []) for r in requests]
        return len(_distinct_blocks(tables)) <= self._cpu_pool().get_num_free_blocks()

    def swap_out(
        self,
        requests: Sequence[Request],
        req_to_blocks: dict[str, list[KVCacheBlock]],
        prefix: PrefixCacheStrategy,
    ) -> list[tuple[int, int]]:
        """Move the group's blocks to the CPU pool (vLLM v0 ``swap_out``).

        Each member's table leaves ``req_to_blocks`` and ``prefix.forget`` is called for it.

        Returns:
            ``[(gpu_block_id, cpu_block_id), ...]``, one pair per distinct block, table order.

        Raises:
            InvalidRequestError: a request holds no GPU blocks or appears twice.
            NoFreeBlocksError: the CPU pool is too small (nothing changes).
        """
        self._check_group(requests, req_to_blocks, "swap_out")
        if not self.can_swap_out(requests, req_to_blocks):
            raise NoFreeBlocksError("swap_out: not enough free CPU blocks for the group")
        tables = [req_to_blocks[r.request_id] for r in requests]
        gpu_blocks = _distinct_blocks(tables)
        cpu_blocks = self._cpu_pool().get_new_blocks(len(gpu_blocks))
        to_cpu = {g.block_id: c for g, c in zip(gpu_blocks, cpu_blocks, strict=True)}
        owners: dict[int, list[str]] = {c.block_id: [] for c in cpu_blocks}
        for req, table in zip(requests, tables, strict=True):
            rid = req.request_id
            mine = _distinct_blocks([table])
            for g in mine:
                owners[to_cpu[g.block_id].block_id].append(rid)
            self.req_to_cpu_blocks[rid] = [to_cpu[g.block_id] for g in table]
            prefix.forget(rid)
            del req_to_blocks[rid]
            # Blocks also held outside the group stay on the GPU: this only drops our references.
            self.block_pool.free_blocks(reversed(mine), owner=rid)
        for c in cpu_blocks:
            c.ref_cnt = len(owners[c.block_id])  # one reference per group member, as on the GPU
        mapping = [(g.block_id, to_cpu[g.block_id].block_id) for g in gpu_blocks]
        if _active(self.tracer):
            self.tracer.record(
                "swap_out",
                request_ids=[r.request_id for r in requests],
                mapping=[list(p) for p in mapping],
                cpu_blocks=[
                    {"block_id": c.block_id, "ref_cnt": c.ref_cnt, "owners": sorted(owners[c.block_id])}
                    for c in cpu_blocks
                ],
            )
        return mapping

    def can_swap_in(self, requests: Sequence[Request], num_free_blocks: int) -> bool:
        """True when the GPU pool can take the group back plus one block per request for the
        next decode (as vLLM v0 ``can_swap_in``), that headroom capped at what the members would
        hold with no sharing at all after one more token each.

        The cap keeps a fork group that fits the pool from being stranded: 3 members sharing one
        partial block need 1 + 2 CoW copies, not 1 + 3, and the engine only admits requests whose
        ``n`` private copies fit the whole pool, so a swapped group always comes back into an empty
        pool (vLLM v0 would fail such a group as AllocStatus.NEVER instead).
        """
        tables = [self.req_to_cpu_blocks.get(r.request_id, []) for r in requests]
        distinct = len(_distinct_blocks(tables))
        private = sum(
            max(len(t), -(-(r.num_computed_tokens + 1) // self.block_size))
            for r, t in zip(requests, tables, strict=True)
        )
        return max(distinct, min(distinct + len(requests), private)) <= num_free_blocks

    def swap_in(
        self,
        requests: Sequence[Request],
        req_to_blocks: dict[str, list[KVCacheBlock]],
        prefix: PrefixCacheStrategy,
    ) -> list[tuple[int, int]]:
        """Move the group's blocks back to fresh GPU blocks (vLLM v0 ``swap_in``).

        Each member's new table goes into ``req_to_blocks``; ``prefix`` evicts to make room and
        ``prefix.recache`` publishes the full computed blocks again (hash path).

        Returns:
            ``[(cpu_block_id, gpu_block_id), ...]``, one pair per distinct block.

        Raises:
            InvalidRequestError: a request is not swapped out or appears twice.
            NoFreeBlocksError: ``can_swap_in`` is False (nothing changes).
        """
        self._check_group(requests, self.req_to_cpu_blocks, "swap_in")
        if not self.can_swap_in(requests, self.block_pool.get_num_free_blocks() + prefix.num_evictable_blocks()):
            raise NoFreeBlocksError("swap_in: not enough free GPU blocks for the group")
        tables = [self.req_to_cpu_blocks[r.request_id] for r in requests]
        cpu_blocks = _distinct_blocks(tables)
        prefix.evict_until_free(len(cpu_blocks))
        to_gpu: dict[int, KVCacheBlock] = {}
        for req, table in zip(requests, tables, strict=True):
            rid = req.request_id
            mine = _distinct_blocks([table])
            fresh = [c for c in mine if c.block_id not in to_gpu]
            for c, g in zip(fresh, self.block_pool.get_new_blocks(len(fresh), owner=rid), strict=True):
                to_gpu[c.block_id] = g
            fresh_ids = {c.block_id for c in fresh}
            self.block_pool.touch([to_gpu[c.block_id] for c in mine if c.block_id not in fresh_ids], owner=rid)
            gpu_table = [to_gpu[c.block_id] for c in table]
            req_to_blocks[rid] = gpu_table
            del self.req_to_cpu_blocks[rid]
            self._cpu_pool().free_blocks(reversed(mine))
            prefix.recache(req, gpu_table)
        mapping = [(c.block_id, to_gpu[c.block_id].block_id) for c in cpu_blocks]
        if _active(self.tracer):
            self.tracer.record(
                "swap_in", request_ids=[r.request_id for r in requests], mapping=[list(p) for p in mapping]
            )
        return mapping

    def free(self, request_id: str) -> None:
        """Release ``request_id``'s CPU blocks, if it is swapped out (else nothing)."""
        table = self.req_to_cpu_blocks.pop(request_id, None)
        if table is not None:
            mine = _distinct_blocks([table])
            self._cpu_pool().free_blocks(reversed(mine))
            if _active(self.tracer):
                self.tracer.record(
                    "free", block_ids=[], cpu_block_ids=[c.block_id for c in reversed(mine)], owner=request_id
                )

    def snapshot(self) -> list[dict[str, Any]]:
        """The CPU blocks in use: ``[{"block_id", "ref_cnt", "owners"}]``."""
        if self.cpu_block_pool is None:
            return []
        owners: dict[int, list[str]] = {}
        for rid, table in self.req_to_cpu_blocks.items():
            for c in _distinct_blocks([table]):
                owners.setdefault(c.block_id, []).append(rid)
        return [
            {"block_id": c.block_id, "ref_cnt": c.ref_cnt, "owners": sorted(owners.get(c.block_id, []))}
            for c in self._cpu_pool().blocks
            if c.ref_cnt > 0
        ]
