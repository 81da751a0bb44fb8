"""Copy-on-write fork (vLLM v0 ``BlockSpaceManager.fork`` / ``append_slot``), half of ``KVCacheManager``.

vLLM v0 served ``SamplingParams(n > 1)`` and beam search by forking a sequence: the children
share every block of the parent, each block's ``ref_cnt`` counting its owners, and the first
write into a shared block copies it. vLLM v1 dropped this (it fans ``n > 1`` out into
independent requests that share only full blocks through prefix caching); the course keeps it
because it is the clearest picture of reference counting. ``allocate_slots`` decides when a
copy is needed; this file holds the fork, the copy itself, and the sharing measurements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pagedlab.core.block_pool import KVCacheBlock, distinct_blocks
from pagedlab.trace import _active

if TYPE_CHECKING:
    from pagedlab.core.block_pool import BlockPool
    from pagedlab.trace import Tracer


class CopyOnWrite:
    """Copy-on-write of ``KVCacheManager``: the fork, the copy, and the queue of pending KV copies.

    ``KVCacheManager`` calls two operations, :meth:`fork_table` and :meth:`extend`; a subclass may
    do them another way (``pagedlab.parts.memory.GuardedForkCow`` runs lab 03's code there).

    Args:
        block_pool: the device pool.
        block_size: tokens per block.
        tracer: optional tracer (``cow_copy`` events).
    """

    def __init__(self, block_pool: BlockPool, block_size: int, tracer: Tracer | None = None) -> None:
        self.block_pool, self.block_size, self.tracer = block_pool, block_size, tracer
        self.pending_copies: list[tuple[int, int]] = []

    def fork_table(
        self, parent_id: str, table: list[KVCacheBlock], num_tokens: int, child_id: str
    ) -> list[KVCacheBlock]:
        """The child's table: ``table``'s blocks, one reference more per *distinct* block (bug B10,
        docs/bugs.md#b10); nothing allocated. Held blocks are never in the free queue, so no queue move."""
        for block in distinct_blocks(table):
            block.ref_cnt += 1
        return list(table)

    def shared_targets(self, req_blocks: list[KVCacheBlock], start: int, end: int) -> list[int]:
        """Indices of the held blocks that tokens ``[start, end)`` write into and others share: each
        needs a private copy first (one new block each)."""
        first, last = start // self.block_size, (end - 1) // self.block_size
        return [i for i in range(first, min(last + 1, len(req_blocks))) if req_blocks[i].ref_cnt > 1]

    def extend(
        self,
        request_id: str,
        req_blocks: list[KVCacheBlock],
        span: tuple[int, int],
        copies: list[int],
        num_new_blocks: int,
    ) -> list[KVCacheBlock]:
        """Make room in ``req_blocks`` (in place) for the tokens of ``span`` (``[start, end)``): a private
        copy of each block at ``copies`` (:meth:`shared_targets`, taken before the allocation changed
        anything), then ``num_new_blocks`` new blocks at the end (the caller checked there are enough
        free). Returns the new blocks at the end."""
        for i in copies:
            self.copy(request_id, req_blocks, i)
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks, owner=request_id)
        req_blocks.extend(new_blocks)
        return new_blocks

    def copy(self, request_id: str, req_blocks: list[KVCacheBlock], i: int) -> None:
        """Give ``request_id`` a private copy of ``req_blocks[i]`` (vLLM v0 ``append_slot`` CoW)."""
        src = req_blocks[i]
        dst = self.block_pool.get_new_blocks(1, owner=request_id)[0]
        req_blocks[i] = dst
        # The source keeps its other owners; exactly one reference (ours) moves to the copy.
        self.block_pool.free_blocks([src], owner=request_id)
        self._queue(request_id, src.block_id, dst.block_id)

    def _queue(self, request_id: str, src: int, dst: int) -> None:
        self.pending_copies.append((src, dst))
        if _active(self.tracer):
            self.tracer.record("cow_copy", request_id=request_id, src=src, dst=dst)

    def take_pending_copies(self) -> list[tuple[int, int]]:
        """Return and clear the ``(src_block_id, dst_block_id)`` copies queued by CoW.

        The engine must copy the KV of every pair, in order, before the next forward pass.
        """
        copies, self.pending_copies = self.pending_copies, []
        return copies
