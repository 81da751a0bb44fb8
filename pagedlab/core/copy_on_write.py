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
from pagedlab.errors import InvalidRequestError
from pagedlab.trace import _active

if TYPE_CHECKING:
    from pagedlab.core.block_pool import BlockPool
    from pagedlab.request import Request
    from pagedlab.trace import Tracer


class CopyOnWriteMixin:
    """CoW half of ``KVCacheManager``."""

    # State owned by ``KVCacheManager``, declared here for the type checker.
    block_pool: BlockPool
    tracer: Tracer | None
    req_to_blocks: dict[str, list[KVCacheBlock]]
    req_to_cpu_blocks: dict[str, list[KVCacheBlock]]
    num_cached_block: dict[str, int]
    _pending_copies: list[tuple[int, int]]

    if TYPE_CHECKING:

        def _radix_fork(self, parent_id: str, child_id: str) -> None: ...  # RadixPrefixMixin

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
        if parent_request.is_finished():
            raise InvalidRequestError(f"cannot fork finished request {pid}")
        if pid in self.req_to_cpu_blocks:
            raise InvalidRequestError(f"cannot fork swapped-out request {pid}")
        if pid not in self.req_to_blocks:
            raise InvalidRequestError(f"cannot fork request {pid}: it holds no blocks")
        if cid in self.req_to_blocks or cid in self.req_to_cpu_blocks or cid == pid:
            raise InvalidRequestError(f"fork child {cid} already holds blocks")
        n = parent_request.num_computed_tokens
        if child_request.all_token_ids[:n] != parent_request.all_token_ids[:n]:
            raise InvalidRequestError(f"fork child {cid} does not start with parent {pid}'s computed tokens")
        blocks = self.req_to_blocks[pid]
        shared = distinct_blocks(blocks)
        for block in shared:
            block.ref_cnt += 1  # held blocks are never in the free queue, so no queue move
        self.req_to_blocks[cid] = list(blocks)
        self.num_cached_block[cid] = self.num_cached_block.get(pid, 0)
        child_request.num_computed_tokens = n
        self._radix_fork(pid, cid)
        if _active(self.tracer):
            self.tracer.record("fork", parent=pid, child=cid, block_ids=[b.block_id for b in shared])

    def _copy_on_write(self, request: Request, req_blocks: list[KVCacheBlock], i: int) -> None:
        """Give ``request`` a private copy of ``req_blocks[i]`` (vLLM v0 ``append_slot`` CoW)."""
        rid = request.request_id
        src = req_blocks[i]
        dst = self.block_pool.get_new_blocks(1, owner=rid)[0]
        req_blocks[i] = dst
        # The source keeps its other owners; exactly one reference (ours) moves to the copy.
        self.block_pool.free_blocks([src], owner=rid)
        self._pending_copies.append((src.block_id, dst.block_id))
        if _active(self.tracer):
            self.tracer.record("cow_copy", request_id=rid, src=src.block_id, dst=dst.block_id)

    def take_pending_copies(self) -> list[tuple[int, int]]:
        """Return and clear the ``(src_block_id, dst_block_id)`` copies queued by CoW.

        The engine must copy the KV of every pair, in order, before the next forward pass.
        """
        copies, self._pending_copies = self._pending_copies, []
        return copies

    def num_held_blocks(self) -> int:
        """Distinct blocks referenced by requests (shared blocks count once)."""
        return len({b.block_id for blocks in self.req_to_blocks.values() for b in blocks})

    def num_blocks_without_sharing(self) -> int:
        """Blocks the same requests would need if nothing were shared (sum of table lengths)."""
        return sum(len(distinct_blocks(blocks)) for blocks in self.req_to_blocks.values())
