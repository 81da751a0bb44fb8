"""Guards of the KV-memory slots: the free queue (lab 02), the slot mapping (lab 02), the prefix
lookup on the hash chain (lab 07) and fork / copy-on-write append (lab 03)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pagedlab.core.block_pool import BlockHash, BlockPool, KVCacheBlock
from pagedlab.core.copy_on_write import CopyOnWrite
from pagedlab.core.kv_cache_manager import find_longest_cache_hit
from pagedlab.errors import ComponentError
from pagedlab.kernels.paged_kv import kit_slot_mapping
from pagedlab.parts.contracts import (
    APPEND_TOKEN,
    APPEND_TOKEN_MUTATES,
    FORK,
    FORK_MUTATES,
    FREE_QUEUE_MUTATES,
    GET_ALL_FREE_BLOCKS,
    SLOT_MAPPING,
    SLOT_MAPPING_MUTATES,
)
from pagedlab.parts.guard import Guard
from pagedlab.parts.protocols import FreeQueue, PrefixLookupFn, SlotMappingFn
from pagedlab.trace import Tracer

__all__ = [
    "GuardedFreeQueue",
    "free_queue_factory",
    "guarded_slot_mapping",
    "guarded_prefix_lookup",
    "ForkCowFns",
    "GuardedForkCow",
]


def _queue_state(queue: Any, block: KVCacheBlock | None = None) -> dict[str, Any]:
    """Plain state for a picture: the queue's block ids front first (at most 64), the block at issue."""
    ids: list[int] = []
    node = getattr(getattr(queue, "fake_free_list_head", None), "next_free_block", None)
    while node is not None and node.block_id >= 0 and len(ids) < 64:
        ids.append(node.block_id)
        node = node.next_free_block
    return {"free_queue": ids, "block": None if block is None else block.block_id}


class GuardedFreeQueue:
    """A learner's free queue, checked after every operation the block pool makes on it.

    Invariants: ``popleft`` hands out the front block (when the queue keeps vLLM's ``fake_free_list_head``);
    a handed-out block is out of the queue (both links None) and unused (``ref_cnt 0``);
    a removed block's neighbours are linked to each other; an appended block sits at the tail,
    linked both ways; prepended blocks sit at the front in the order given, linked both ways, before
    the old front; ``num_free_blocks`` moves by exactly one per block.
    """

    def __init__(self, inner: FreeQueue, guard: Guard) -> None:
        self.inner, self.guard = inner, guard

    @property
    def num_free_blocks(self) -> int:
        n = self.inner.num_free_blocks
        self.guard.expect_type(n, int, "num_free_blocks")
        return n

    def _check_count(self, before: int, delta: int, op: str, block: KVCacheBlock | None) -> None:
        if self.inner.num_free_blocks != before + delta:
            raise self.guard.fail(
                f"num_free_blocks went from {before} to {self.inner.num_free_blocks} in {op}, "
                f"expected {before + delta}",
                state=_queue_state(self.inner, block),
            )

    def popleft(self) -> KVCacheBlock:
        before = self.inner.num_free_blocks
        # the front, where the queue keeps vLLM's sentinel name (other names skip this check)
        front = getattr(getattr(self.inner, "fake_free_list_head", None), "next_free_block", None)
        block = self.guard.call(self.inner.popleft)
        self.guard.expect_type(block, KVCacheBlock, "popleft()")
        if block.block_id < 0:
            raise self.guard.fail("popleft() handed out a sentinel block (id -1)", state=_queue_state(self.inner))
        if isinstance(front, KVCacheBlock) and front.block_id >= 0 and block is not front:
            raise self.guard.fail(
                f"popleft() handed out block {block.block_id}, not the front block {front.block_id}: the least "
                "recently freed block goes first",
                state=_queue_state(self.inner, block),
            )
        if block.prev_free_block is not None or block.next_free_block is not None:
            raise self.guard.fail(
                f"popleft() handed out block {block.block_id} with its free-queue links still set",
                state=_queue_state(self.inner, block),
            )
        if block.ref_cnt != 0:
            raise self.guard.fail(
                f"popleft() handed out block {block.block_id}, which is in use (ref_cnt {block.ref_cnt})",
                state=_queue_state(self.inner, block),
            )
        self._check_count(before, -1, "popleft()", block)
        popped: KVCacheBlock = block
        return popped

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        blocks: list[KVCacheBlock] = []
        for _ in range(n):
            block = self.popleft()
            if any(b is block for b in blocks):
                raise self.guard.fail(
                    f"popleft() handed out block {block.block_id} twice in a row of pops "
                    "(is it still linked from the queue?)",
                    state=_queue_state(self.inner, block),
                )
            blocks.append(block)
        return blocks

    def remove(self, block: KVCacheBlock) -> None:
        before, prev, nxt = self.inner.num_free_blocks, block.prev_free_block, block.next_free_block
        self.guard.call(self.inner.remove, block)
        if block.prev_free_block is not None or block.next_free_block is not None:
            raise self.guard.fail(
                f"remove() left block {block.block_id}'s links set", state=_queue_state(self.inner, block)
            )
        if prev is None or nxt is None or prev.next_free_block is not nxt or nxt.prev_free_block is not prev:
            raise self.guard.fail(
                f"remove(block {block.block_id}) did not link its neighbours to each other",
                state=_queue_state(self.inner, block),
            )
        self._check_count(before, -1, "remove()", block)

    def append(self, block: KVCacheBlock) -> None:
        before = self.inner.num_free_blocks
        self.guard.call(self.inner.append, block)
        prev, nxt = block.prev_free_block, block.next_free_block
        if (
            prev is None
            or nxt is None
            or prev.next_free_block is not block
            or nxt.prev_free_block is not block
            or nxt.block_id != -1
            or nxt.next_free_block is not None
        ):
            raise self.guard.fail(
                f"append(block {block.block_id}) did not put it at the tail, linked both ways",
                state=_queue_state(self.inner, block),
            )
        self._check_count(before, +1, "append()", block)

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        for block in blocks:
            self.append(block)

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        blocks = list(blocks)
        before = self.inner.num_free_blocks
        # the old front, where the queue keeps vLLM's sentinel name (O(1); other names skip this part)
        old_front = getattr(getattr(self.inner, "fake_free_list_head", None), "next_free_block", None)
        handed = list(blocks)
        self.guard.call(self.inner.prepend_n, handed)
        FREE_QUEUE_MUTATES.enforce_read_only(
            self.guard,
            "the blocks given to prepend_n",
            len(handed) == len(blocks) and all(a is b for a, b in zip(handed, blocks)),
        )
        ids = [b.block_id for b in blocks]
        if blocks:
            chain = [blocks[0].prev_free_block, *blocks, blocks[-1].next_free_block]
            head, after = chain[0], chain[-1]
            linked = all(
                x is not None and y is not None and x.next_free_block is y and y.prev_free_block is x
                for x, y in zip(chain, chain[1:])
            )
            at_front = head is not None and head.block_id == -1 and head.prev_free_block is None
            if not linked or not at_front or after is None or (old_front is not None and after is not old_front):
                raise self.guard.fail(
                    f"prepend_n(blocks {ids}) did not put them at the front in that order, linked both ways, "
                    "before the old front",
                    state=_queue_state(self.inner, blocks[0]),
                )
        self._check_count(before, len(blocks), f"prepend_n(blocks {ids})", blocks[0] if blocks else None)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        blocks = self.guard.call(self.inner.get_all_free_blocks)
        GET_ALL_FREE_BLOCKS.enforce(self.guard, blocks)
        return list(blocks)


def free_queue_factory(
    cls: Callable[[list[KVCacheBlock]], FreeQueue], guard: Guard
) -> Callable[[list[KVCacheBlock]], Any]:
    """``BlockPool``'s queue factory for a learner's queue class: build it, check it holds every block."""

    def build(blocks: list[KVCacheBlock]) -> GuardedFreeQueue:
        given = list(blocks)
        queue = guard.call(cls, blocks)
        FREE_QUEUE_MUTATES.enforce_read_only(
            guard,
            "the blocks given to __init__",
            len(given) == len(blocks) and all(a is b for a, b in zip(given, blocks)),
        )
        if getattr(queue, "num_free_blocks", None) != len(blocks):
            raise guard.fail(
                f"a new queue of {len(blocks)} blocks has num_free_blocks={getattr(queue, 'num_free_blocks', None)!r}"
            )
        if any(b.prev_free_block is None or b.next_free_block is None for b in blocks):
            raise guard.fail("a new queue left some blocks without free-queue links", state=_queue_state(queue))
        return GuardedFreeQueue(queue, guard)

    return build


def guarded_slot_mapping(fn: SlotMappingFn, guard: Guard) -> SlotMappingFn:
    """``fn`` checked per request: one int per position, each inside the request's blocks, at its row."""

    def call(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
        table, pos = list(block_table), list(positions)
        out = guard.call(fn, table, pos, block_size)
        SLOT_MAPPING_MUTATES.enforce_read_only(guard, "block_table", table == list(block_table))
        SLOT_MAPPING_MUTATES.enforce_read_only(guard, "positions", pos == list(positions))
        SLOT_MAPPING.enforce(guard, out)  # a list of ints (numpy ints too), as check() requires
        if len(out) != len(positions):
            raise guard.fail(f"{len(out)} slots for {len(positions)} positions")
        held = set(block_table)
        for p, slot in zip(positions, out):
            state = {"block_table": list(block_table), "position": p, "slot": slot, "block_size": block_size}
            if slot // block_size not in held:
                raise guard.fail(
                    f"slot {slot} of position {p} is outside the request's blocks {list(block_table)}", state=state
                )
            want = kit_slot_mapping(list(block_table), [p], block_size)[0]
            if slot != want:
                raise guard.fail(
                    f"position {p} went to slot {slot}, inside the request's blocks but not its "
                    f"row (expected slot {want})",
                    state=state,
                )
        return [int(slot) for slot in out]

    return call


def guarded_prefix_lookup(fn: PrefixLookupFn, guard: Guard) -> PrefixLookupFn:
    """``fn`` checked: a chain prefix of cached blocks, never covering the last token, the longest."""

    def call(
        block_hashes: list[BlockHash],
        get_cached_block: Callable[[BlockHash], KVCacheBlock | None],
        num_tokens: int,
        block_size: int,
    ) -> list[KVCacheBlock]:
        hits = guard.call(fn, list(block_hashes), get_cached_block, num_tokens, block_size)
        guard.expect_type(hits, list, "the hit blocks")
        if len(hits) * block_size > num_tokens - 1:
            raise guard.fail(
                f"the hit covers {len(hits) * block_size} of {num_tokens} tokens: the last token "
                "must always be computed (its logits give the next token)"
            )
        for i, block in enumerate(hits):
            guard.expect_type(block, KVCacheBlock, f"hit {i}")
            if block.block_hash != block_hashes[i]:
                raise guard.fail(f"hit {i} is block {block.block_id}, which does not hold the chain's hash {i}")
        best = find_longest_cache_hit(block_hashes, get_cached_block, num_tokens, block_size)
        if len(hits) != len(best):
            raise guard.fail(f"{len(hits)} blocks hit, but the longest cached prefix has {len(best)}")
        checked: list[KVCacheBlock] = hits
        return checked

    return call


@dataclass(frozen=True)
class ForkCowFns:
    """What fills the ``fork_cow`` slot: lab 03's ``fork(pool, parent, child_id) -> Seq`` and
    ``append_token(pool, seq) -> (src, dst) | None``, with the learner kit's ``RefCountedPool`` view
    over a real pool (``pool_view(block_pool, block_size)``) and ``Seq`` (passed in because the engine
    sits below the kit). ``yours``: which are the learner's; :meth:`merge` as :class:`RadixOps`'s."""

    fork: Callable[[Any, Any, str], Any]
    append_token: Callable[[Any, Any], tuple[int, int] | None]
    pool_view: Callable[[BlockPool, int], Any]
    seq: Callable[[str, list[int], int], Any]
    yours: frozenset[str] = frozenset()

    def merge(self, other: ForkCowFns) -> ForkCowFns:
        """``self`` with ``other``'s learner functions taking their places."""
        return replace(self, **{n: getattr(other, n) for n in other.yours}, yours=self.yours | other.yours)


class GuardedForkCow(CopyOnWrite):
    """The engine's copy-on-write (``KVCacheManager.cow``) with its fork and one-token append run by
    lab 03's functions on a ``RefCountedPool`` view of the real block pool and a ``Seq`` view of the
    request's block table, checked after every call.

    Invariants: fork allocates nothing, leaves the parent as it was, gives the child the parent's table
    and length, and adds exactly one reference per block; append changes the sequence's table in place,
    counts the token (``num_tokens + 1``), keeps every block before the last,
    adds a block exactly when the token starts one, copies the last block exactly when it is shared
    (the pair is (old, new)), leaves the block the token goes into unshared (``ref_cnt == 1``), and
    moves reference counts and the free count by exactly that.

    Args:
        fns: the functions (:class:`ForkCowFns`).
        block_pool: the engine's device pool.
        block_size: tokens per block.
        guard: the ``fork_cow`` guard.
    """

    def __init__(
        self, fns: ForkCowFns, block_pool: BlockPool, block_size: int, guard: Guard, tracer: Tracer | None = None
    ) -> None:
        super().__init__(block_pool, block_size, tracer)
        self.fns, self.guard = fns, guard

    def fork_table(
        self, parent_id: str, table: list[KVCacheBlock], num_tokens: int, child_id: str
    ) -> list[KVCacheBlock]:
        """:meth:`fork`."""
        return self.fork(parent_id, table, num_tokens, child_id)

    def extend(
        self,
        request_id: str,
        req_blocks: list[KVCacheBlock],
        span: tuple[int, int],
        copies: list[int],
        num_new_blocks: int,
    ) -> list[KVCacheBlock]:
        """A one-token append to a table that holds every earlier token goes through :meth:`append`
        (lab 03's ``append_token``); anything else (a prefill, a chunk) is the kit's ``extend``."""
        start, end = span
        if end - start != 1 or len(req_blocks) != -(-start // self.block_size):
            return super().extend(request_id, req_blocks, span, copies, num_new_blocks)
        held = len(req_blocks)
        pair = self.append(request_id, req_blocks, start)
        if pair is not None:
            self._queue(request_id, pair[0], pair[1])
        return req_blocks[held:]

    def _fail(self, invariant: str, table: list[int], seq: Any = None) -> ComponentError:
        got = getattr(seq, "block_table", None)
        counts = {b: self.block_pool.blocks[b].ref_cnt for b in table}
        return self.guard.fail(invariant, detail=f"table {table} -> {got}; ref_cnt {counts}")

    def _blocks(self, ids: Any, table: list[int]) -> list[KVCacheBlock]:
        n = self.block_pool.num_gpu_blocks
        if not isinstance(ids, list) or not all(isinstance(b, int) and 0 <= b < n for b in ids):
            raise self._fail(f"the block table became {ids!r}, not a list of block ids", table)
        return [self.block_pool.blocks[b] for b in ids]

    def fork(self, parent_id: str, table: list[KVCacheBlock], num_tokens: int, child_id: str) -> list[KVCacheBlock]:
        """Lab 03's ``fork`` on the parent's table; returns the child's table."""
        ids = [b.block_id for b in table]
        refs, free = [b.ref_cnt for b in table], self.block_pool.get_num_free_blocks()
        given = list(ids)
        parent = self.fns.seq(parent_id, given, num_tokens)
        child = self.guard.call(self.fns.fork, self.fns.pool_view(self.block_pool, self.block_size), parent, child_id)
        problem = FORK.problem(child)
        if problem is not None:
            raise self._fail(problem, ids, child)
        if parent.block_table is not given or parent.block_table != ids:
            raise self._fail(FORK_MUTATES.changed("parent.block_table"), ids, parent)
        if parent.num_tokens != num_tokens:
            raise self._fail("fork changed the parent's length (num_tokens)", ids, parent)
        if getattr(child, "block_table", None) is parent.block_table:
            raise self._fail("the child shares the parent's block-table list (give it its own list)", ids, child)
        if getattr(child, "block_table", None) != ids or getattr(child, "num_tokens", None) != num_tokens:
            raise self._fail(f"the child {child!r} does not have the parent's table and length", ids, child)
        if self.block_pool.get_num_free_blocks() != free:
            raise self._fail("fork allocated or freed blocks (it must only share)", ids, child)
        if [b.ref_cnt for b in table] != [r + 1 for r in refs]:
            raise self._fail("ref counts do not add up: each shared block needs exactly one reference more", ids, child)
        return self._blocks(child.block_table, ids)

    def append(self, request_id: str, table: list[KVCacheBlock], num_tokens: int) -> tuple[int, int] | None:
        """Lab 03's ``append_token`` for the token at ``num_tokens``; updates ``table`` in place."""
        bs, ids = self.block_size, [b.block_id for b in table]
        starts = num_tokens % bs == 0
        shared = not starts and table[-1].ref_cnt > 1
        refs, free = [b.ref_cnt for b in table], self.block_pool.get_num_free_blocks()
        given = list(ids)
        seq = self.fns.seq(request_id, given, num_tokens)
        pair = self.guard.call(self.fns.append_token, self.fns.pool_view(self.block_pool, bs), seq)
        problem = APPEND_TOKEN.problem(pair)
        if problem is not None:
            raise self._fail(problem, ids, seq)
        APPEND_TOKEN_MUTATES.enforce_in_place(self.guard, "seq.block_table", given, getattr(seq, "block_table", None))
        if getattr(seq, "num_tokens", None) != num_tokens + 1:
            raise self._fail(
                f"after append_token the sequence has num_tokens={getattr(seq, 'num_tokens', None)!r}, expected "
                f"{num_tokens + 1}: count the token (seq.num_tokens += 1)",
                ids,
                seq,
            )
        new = self._blocks(seq.block_table, ids)
        keep = len(ids) if starts else len(ids) - 1
        if [b.block_id for b in new[:keep]] != ids[:keep] or len(new) != keep + 1:
            raise self._fail("the table lost or changed blocks it must keep", ids, seq)
        added = [] if (not starts and not shared) else [new[-1]]
        if new[-1].ref_cnt != 1:
            raise self._fail(
                f"block {new[-1].block_id} is written while shared (ref_cnt {new[-1].ref_cnt} after append)", ids, seq
            )
        want_pair = (ids[-1], new[-1].block_id) if shared else None
        if (tuple(pair) if isinstance(pair, (tuple, list)) else pair) != want_pair:
            raise self._fail(
                f"it returned the copy {pair!r}, expected {want_pair!r} (src = the shared block, dst = its copy)",
                ids,
                seq,
            )
        expect_refs = refs[:-1] + [refs[-1] - 1] if shared else refs
        if [b.ref_cnt for b in table] != expect_refs or self.block_pool.get_num_free_blocks() != free - len(added):
            raise self._fail(
                "ref counts do not add up (a reference leaked, or a block was allocated and not used)", ids, seq
            )
        table[:] = new
        return want_pair
