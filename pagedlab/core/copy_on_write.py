"""Copy-on-write fork (vLLM v0 ``BlockSpaceManager.fork`` / ``append_slot``), half of ``KVCacheManager``.

vLLM v0 served ``SamplingParams(n > 1)`` and beam search by forking a sequence: the children
share every block of the parent, each block's ``ref_cnt`` counting its owners, and the first
write into a shared block copies it. vLLM v1 dropped this (it fans ``n > 1`` out into
independent requests that share only full blocks through prefix caching); the course keeps it
because it is the clearest picture of reference counting. ``allocate_slots`` decides when a
copy is needed; this file holds the fork, the copy itself, and the sharing measurements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pagedlab.core.block_pool import KVCacheBlock, distinct_blocks
from pagedlab.trace import _active

if TYPE_CHECKING:
    from pagedlab.core.block_pool import BlockPool
    from pagedlab.trace import Tracer


class ForkCowOps(Protocol):
    """The ``fork_cow`` slot (lab 03): how a fork shares a table and how a one-token append copies.

    ``fork`` returns the child's table (the parent's blocks, each one reference more); ``append``
    makes room for the token at position ``num_tokens`` in ``table`` (in place: a new block at the
    end, or a private copy of a shared last block) and returns the ``(src, dst)`` block ids of a
    copy, or None. Both work on the pool's ``ref_cnt``; neither may touch other tables.
    """

    def fork(self, parent_id: str, table: list[KVCacheBlock], num_tokens: int, child_id: str) -> list[KVCacheBlock]: ...
    def append(self, request_id: str, table: list[KVCacheBlock], num_tokens: int) -> tuple[int, int] | None: ...


class CopyOnWrite:
    """Copy-on-write of ``KVCacheManager``: the fork, the copy, and the queue of pending KV copies.

    Args:
        block_pool: the device pool.
        tracer: optional tracer (``cow_copy`` events).
        ops: a plugged-in ``fork_cow`` slot (None: the kit's code below). When set, ``fork`` goes
            through ``ops.fork`` and a one-token append through ``ops.append`` (``append_one``).
    """

    def __init__(self, block_pool: BlockPool, tracer: Tracer | None, ops: ForkCowOps | None = None) -> None:
        self.block_pool, self.tracer, self.ops = block_pool, tracer, ops
        self.pending_copies: list[tuple[int, int]] = []

    def fork_table(
        self, parent_id: str, table: list[KVCacheBlock], num_tokens: int, child_id: str
    ) -> list[KVCacheBlock]:
        """The child's table: ``table``'s blocks, one reference more per *distinct* block (bug B10,
        docs/bugs.md#b10); nothing allocated. Held blocks are never in the free queue, so no queue move."""
        if self.ops is not None:
            return self.ops.fork(parent_id, table, num_tokens, child_id)
        for block in distinct_blocks(table):
            block.ref_cnt += 1
        return list(table)

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

    def append_one(self, request_id: str, req_blocks: list[KVCacheBlock], num_tokens: int) -> list[KVCacheBlock]:
        """The plugged ``ops.append`` for the token at position ``num_tokens``; returns the new blocks
        at the end of the table (the caller checked capacity). Only called when ``ops`` is set."""
        assert self.ops is not None, "append_one needs a plugged fork_cow slot"
        held = len(req_blocks)
        pair = self.ops.append(request_id, req_blocks, num_tokens)
        if pair is not None:
            self._queue(request_id, pair[0], pair[1])
        return req_blocks[held:]

    def take_pending_copies(self) -> list[tuple[int, int]]:
        """Return and clear the ``(src_block_id, dst_block_id)`` copies queued by CoW.

        The engine must copy the KV of every pair, in order, before the next forward pass.
        """
        copies, self.pending_copies = self.pending_copies, []
        return copies
