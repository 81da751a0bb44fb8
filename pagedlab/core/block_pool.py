"""Physical KV blocks, the free queue, and the block pool (as vLLM v1 ``vllm/v1/core/block_pool.py``
and ``kv_cache_utils.py``).

A *block* holds the keys and values of ``block_size`` consecutive tokens of one sequence. The pool
owns a fixed number of them; a block is free exactly when nobody references it
(``ref_cnt == 0``), and free blocks wait in an LRU queue where cached (hashed) ones keep their
content until they are reused ("lazy eviction").

Difference from vLLM: vLLM reserves block 0 as ``null_block`` (a placeholder for sliding-window
layers) and never hands it out. pagedlab has no sliding window, so there is **no null block**:
all ``num_gpu_blocks`` blocks are usable and ``free + distinct held == num_gpu_blocks``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pagedlab.errors import ConfigError, DoubleFreeError, NoFreeBlocksError
from pagedlab.trace import Tracer, _active

if TYPE_CHECKING:
    from pagedlab.request import Request

BlockHash = bytes


def distinct_blocks(blocks: Iterable[KVCacheBlock]) -> list[KVCacheBlock]:
    """``blocks`` without repeats (first occurrence kept, order preserved).

    A request holds one reference per *distinct* block of its table, whatever the table
    repeats (bug B10, docs/bugs.md#b10), so fork, free and swap all count through this.
    """
    seen = set()
    out = []
    for b in blocks:
        if b.block_id not in seen:
            seen.add(b.block_id)
            out.append(b)
    return out


class KVCacheBlock:
    """Metadata of one physical KV block (as vLLM v1 ``KVCacheBlock``).

    Attributes:
        block_id: index of the block in the KV tensors, ``0 <= block_id < num_gpu_blocks``.
        ref_cnt: number of live owners (requests, fork children, or the radix tree).
        prev_free_block / next_free_block: intrusive links of ``FreeKVCacheBlockQueue``;
            both are ``None`` exactly when the block is not in the queue.
    """

    __slots__ = ("block_id", "ref_cnt", "_block_hash", "prev_free_block", "next_free_block")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self._block_hash: BlockHash | None = None
        self.prev_free_block: KVCacheBlock | None = None
        self.next_free_block: KVCacheBlock | None = None

    @property
    def block_hash(self) -> BlockHash | None:
        """Hash of the full-block prefix ending at this block, or None if not cached."""
        return self._block_hash

    @block_hash.setter
    def block_hash(self, block_hash: BlockHash) -> None:
        # Write-once: a hashed block is immutable; overwriting would orphan its map entry.
        assert self._block_hash is None, f"block {self.block_id} already has a hash"
        self._block_hash = block_hash

    def reset_hash(self) -> None:
        """Forget the hash (called when the block is evicted for reuse)."""
        self._block_hash = None

    def __repr__(self) -> str:
        h = self._block_hash.hex()[:8] if self._block_hash else None
        return f"KVCacheBlock(id={self.block_id}, ref_cnt={self.ref_cnt}, hash={h})"


class FreeKVCacheBlockQueue:
    """Doubly linked list of free blocks in eviction order (as vLLM v1 ``FreeKVCacheBlockQueue``).

    The front is reused first. The queue does not sort; ``BlockPool.free_blocks`` keeps the order:
    a freed block with a prefix-cache hash joins the tail (LRU: a request's blocks in reverse, so the
    tail of a hash chain is evicted before its shared head), one without a hash joins the *front*
    (``prepend_n``, reused first), as vLLM 0.32.0. A ``deque`` would do for popleft/append, but a
    prefix hit on a free block must pull it out of the *middle* in O(1), hence the intrusive links
    and the two sentinels (no ``None`` checks at the ends).

    Args:
        blocks: initial free blocks, front first (block-id order at pool creation).
    """

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.num_free_blocks = len(blocks)
        self.fake_free_list_head = KVCacheBlock(-1)
        self.fake_free_list_tail = KVCacheBlock(-1)
        prev = self.fake_free_list_head
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = prev

    def popleft(self) -> KVCacheBlock:
        """Remove and return the LRU block. Raises ``NoFreeBlocksError`` when empty."""
        block = self.fake_free_list_head.next_free_block
        if block is None or block is self.fake_free_list_tail:
            raise NoFreeBlocksError("no free blocks available")
        self.remove(block)
        return block

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the ``n`` LRU blocks, front first. Raises if fewer than n are free."""
        if n > self.num_free_blocks:
            raise NoFreeBlocksError(f"asked for {n} blocks, {self.num_free_blocks} free")
        out: list[KVCacheBlock] = []
        curr = self.fake_free_list_head.next_free_block
        for _ in range(n):
            assert curr is not None
            out.append(curr)
            nxt = curr.next_free_block
            curr.prev_free_block = curr.next_free_block = None
            curr = nxt
        assert curr is not None  # at worst the tail sentinel
        self.fake_free_list_head.next_free_block = curr
        curr.prev_free_block = self.fake_free_list_head
        self.num_free_blocks -= n
        return out

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from anywhere in the queue in O(1)."""
        prev, nxt = block.prev_free_block, block.next_free_block
        assert prev is not None and nxt is not None, f"block {block.block_id} is not in the free queue"
        prev.next_free_block = nxt
        nxt.prev_free_block = prev
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """Put ``block`` at the tail (most recently used)."""
        assert block.prev_free_block is None, f"block {block.block_id} is already in the free queue"
        last = self.fake_free_list_tail.prev_free_block
        assert last is not None  # at worst the head sentinel
        last.next_free_block = block
        block.prev_free_block = last
        block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = block
        self.num_free_blocks += 1

    def append_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Append ``blocks`` at the tail in the order given."""
        for block in blocks:
            self.append(block)

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        """Put ``blocks`` at the front in the order given: ``blocks[0]`` is the next one handed out.

        As vLLM 0.32.0 ``FreeKVCacheBlockQueue.prepend_n`` (``vllm/v1/core/kv_cache_utils.py:426``):
        the blocks are linked to each other and spliced in between the head sentinel and the old
        front, O(len(blocks)) whatever the queue's length; an empty list changes nothing. vLLM 0.11's
        queue had no ``prepend_n`` (every freed block was appended).
        """
        if not blocks:
            return
        for block in blocks:
            assert block.prev_free_block is None, f"block {block.block_id} is already in the free queue"
        first = self.fake_free_list_head.next_free_block
        assert first is not None  # at worst the tail sentinel
        prev = self.fake_free_list_head
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = first
        first.prev_free_block = prev
        self.num_free_blocks += len(blocks)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """All free blocks, front (LRU) first. O(n); for tests and snapshots."""
        out: list[KVCacheBlock] = []
        curr = self.fake_free_list_head.next_free_block
        while curr is not None and curr is not self.fake_free_list_tail:
            out.append(curr)
            curr = curr.next_free_block
        return out


class BlockPool:
    """All KV blocks of one device, the free queue, and the prefix-cache map (as vLLM v1 ``BlockPool``).

    Invariants (checked by the property tests):
        * a block is in ``free_block_queue`` iff ``ref_cnt == 0``;
        * ``get_num_free_blocks() + #(blocks with ref_cnt > 0) == num_gpu_blocks`` (no null block);
        * ``block.block_hash == h`` iff ``block`` is in ``cached_block_hash_to_block[h]``.

    Args:
        num_gpu_blocks: number of blocks, >= 1.
        enable_caching: keep a hash -> block map so full blocks can be reused by content.
        tracer: optional ``Tracer``; records init/alloc/touch/free/cache/evict.
        free_queue_factory: builds the free queue from the initial blocks (default
            ``FreeKVCacheBlockQueue``); any object with its methods will do.

    Raises:
        ConfigError: ``num_gpu_blocks`` is not a positive int.
    """

    def __init__(
        self,
        num_gpu_blocks: int,
        enable_caching: bool,
        tracer: Tracer | None = None,
        free_queue_factory: Callable[[list[KVCacheBlock]], FreeKVCacheBlockQueue] | None = None,
    ) -> None:
        if isinstance(num_gpu_blocks, bool) or not isinstance(num_gpu_blocks, int) or num_gpu_blocks < 1:
            raise ConfigError(f"num_gpu_blocks must be an int >= 1, got {num_gpu_blocks!r}")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.tracer = tracer
        self.blocks = [KVCacheBlock(i) for i in range(num_gpu_blocks)]
        # The free-queue slot (``pagedlab.engine.components``): the kit's queue unless one is given.
        self.free_block_queue = (free_queue_factory or FreeKVCacheBlockQueue)(self.blocks)
        # hash -> {block_id: block}. Several blocks may carry the same hash: vLLM does not
        # de-duplicate, so a running request's block table never changes (append-only).
        self.cached_block_hash_to_block: dict[BlockHash, dict[int, KVCacheBlock]] = {}
        if _active(tracer):
            tracer.record("init", num_gpu_blocks=num_gpu_blocks, enable_caching=enable_caching)

    # --- prefix cache -------------------------------------------------------------------
    def get_cached_block(self, block_hash: BlockHash) -> KVCacheBlock | None:
        """Any one block cached under ``block_hash``, or None. Does not change any state."""
        blocks = self.cached_block_hash_to_block.get(block_hash)
        if not blocks:
            return None
        return next(iter(blocks.values()))

    def cache_full_blocks(
        self,
        request: Request,
        blocks: list[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
    ) -> None:
        """Publish ``blocks[num_cached_blocks:num_full_blocks]`` under ``request.block_hashes``.

        As vLLM v1 ``BlockPool.cache_full_blocks`` (single KV group). A block that already
        carries a hash (shared with a fork sibling that published it first) is skipped: its
        content, hence its hash, is the same.

        Args:
            request: supplies ``block_hashes`` (one per full block, computed by the request).
            blocks: the request's block table.
            num_cached_blocks: blocks of this request already published.
            num_full_blocks: blocks that are full now.
            block_size: tokens per block (only used to check there are enough hashes).
        """
        if num_cached_blocks >= num_full_blocks or not self.enable_caching:
            return
        assert len(request.block_hashes) >= num_full_blocks, (
            f"{request.request_id}: {len(request.block_hashes)} hashes for {num_full_blocks} full "
            f"blocks of {block_size} tokens"
        )
        published, hashes = [], []
        for i in range(num_cached_blocks, num_full_blocks):
            blk, h = blocks[i], request.block_hashes[i]
            if blk.block_hash is not None:
                assert blk.block_hash == h, f"block {blk.block_id} is shared but its hash differs"
                continue
            blk.block_hash = h
            self.cached_block_hash_to_block.setdefault(h, {})[blk.block_id] = blk
            published.append(blk.block_id)
            hashes.append(h.hex())
        if published and _active(self.tracer):
            self.tracer.record("cache", block_ids=published, block_hashes=hashes, owner=request.request_id)

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop ``block``'s hash and map entry if it has one (lazy eviction on reuse, bug B6, docs/bugs.md#b6)."""
        h = block.block_hash
        if h is None:
            return False
        entry = self.cached_block_hash_to_block.get(h)
        if entry is not None:
            entry.pop(block.block_id, None)
            if not entry:
                del self.cached_block_hash_to_block[h]
        block.reset_hash()
        return True

    # --- allocation ---------------------------------------------------------------------
    def get_new_blocks(self, num_blocks: int, owner: str | None = None) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` blocks from the LRU front, each with ``ref_cnt`` 1 and no hash.

        As vLLM v1 ``BlockPool.get_new_blocks``: a popped block that still holds cached content
        is evicted now (its hash and map entry are dropped).

        Args:
            num_blocks: how many, >= 0.
            owner: request id, used only for the trace.

        Raises:
            NoFreeBlocksError: ``num_blocks`` exceeds the free count (nothing changes).
        """
        if num_blocks > self.free_block_queue.num_free_blocks:
            raise NoFreeBlocksError(
                f"cannot get {num_blocks} free blocks: only {self.free_block_queue.num_free_blocks} free"
            )
        blocks = self.free_block_queue.popleft_n(num_blocks)
        evicted = []
        for block in blocks:
            assert block.ref_cnt == 0
            if self._maybe_evict_cached_block(block):
                evicted.append(block.block_id)
            block.ref_cnt = 1
        if _active(self.tracer):
            if evicted:
                self.tracer.record("evict", block_ids=evicted, cache="hash")
            if blocks:
                self.tracer.record("alloc", block_ids=[b.block_id for b in blocks], owner=owner)
        return blocks

    def touch(self, blocks: Iterable[KVCacheBlock], owner: str | None = None) -> None:
        """Add one reference to each block; a free one leaves the queue (prefix hit). As vLLM v1."""
        blocks = list(blocks)
        for block in blocks:
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
        if blocks and _active(self.tracer):
            self.tracer.record("touch", block_ids=[b.block_id for b in blocks], owner=owner)

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock], owner: str | None = None) -> None:
        """Drop one reference per block; blocks reaching 0 go back to the free queue. Hashes are kept.

        As vLLM 0.32.0 ``BlockPool.free_blocks`` (``vllm/v1/core/block_pool.py:774-805``): a block
        reaching 0 references that has no hash, or any such block when caching is off
        (``block.block_hash is None or not self.enable_caching``, line 793), goes to the queue's
        **front** (``prepend_n``, line 801: "LIFO reuse of non-cached blocks"); one with a hash goes
        to the **tail** (``append_n``, line 803: LRU, so with a request's blocks passed in reverse its
        chain tail is evicted first). Both keep the order of ``ordered_blocks``, a block named twice
        at the place where it reaches 0. vLLM 0.11 appended every freed block to the tail.

        Raises:
            DoubleFreeError: some block would go below 0 references (checked first; nothing changes).
        """
        ordered_blocks = list(ordered_blocks)
        # Count per block so a list that names one block twice is checked correctly.
        drops: dict[int, int] = {}
        for block in ordered_blocks:
            drops[block.block_id] = drops.get(block.block_id, 0) + 1
            if drops[block.block_id] > block.ref_cnt:
                raise DoubleFreeError(f"double free of block {block.block_id} (ref_cnt {block.ref_cnt})")
        evict_first: list[KVCacheBlock] = []  # no hash: never a prefix hit, reused first
        evict_last: list[KVCacheBlock] = []  # hashed: cached until the LRU front reaches it
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if block.block_hash is None or not self.enable_caching:
                    evict_first.append(block)
                else:
                    evict_last.append(block)
        self.free_block_queue.prepend_n(evict_first)
        self.free_block_queue.append_n(evict_last)
        if ordered_blocks and _active(self.tracer):
            self.tracer.record(
                "free",
                block_ids=[b.block_id for b in ordered_blocks],
                to_front=[b.block_id for b in evict_first],
                to_tail=[b.block_id for b in evict_last],
                owner=owner,
            )

    # --- accounting ---------------------------------------------------------------------
    def get_num_free_blocks(self) -> int:
        """Blocks in the free queue (cached-but-free ones included)."""
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Fraction of blocks referenced, in [0, 1] (vLLM excludes its null block; we have none)."""
        return 1.0 - self.get_num_free_blocks() / self.num_gpu_blocks

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash. Refused (returns False, nothing changes) while any block is held."""
        if self.get_num_free_blocks() != self.num_gpu_blocks:
            return False
        self.cached_block_hash_to_block.clear()
        for block in self.blocks:
            block.reset_hash()
        return True

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able state: the ``pagedlab.trace`` snapshot format with empty ``owners``,
        plus ``block_hash`` (hex or None) per block."""
        return {
            "num_gpu_blocks": self.num_gpu_blocks,
            "num_free_blocks": self.get_num_free_blocks(),
            "free_queue": [b.block_id for b in self.free_block_queue.get_all_free_blocks()],
            "blocks": [
                {
                    "block_id": b.block_id,
                    "ref_cnt": b.ref_cnt,
                    "owners": [],
                    "hashed": b.block_hash is not None,
                    "free": b.ref_cnt == 0,
                    "block_hash": b.block_hash.hex() if b.block_hash else None,
                }
                for b in self.blocks
            ],
        }
