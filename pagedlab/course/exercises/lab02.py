"""Lab 02 - block pool and block table.

* ``02.free_queue`` - ``FreeKVCacheBlockQueue``: the doubly linked free list of vLLM v1, with
  O(1) ``popleft`` / ``append`` / ``remove`` and vLLM 0.32.0's ``prepend_n`` (O(1) per block given:
  the block pool puts freed blocks without a hash at the front). Reference: ``pagedlab.core.block_pool``.
  The O(1) test counts link reads/writes and ``==`` comparisons on instrumented blocks (no
  wall-clock timing): a queue of 1024 blocks must cost as few as one of 16.
* ``02.slot_mapping`` - ``slot_mapping(block_table, positions, block_size)``: in ``lab02_slot_mapping.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import MemberDescriptorType
from typing import Any

from hypothesis import strategies as st

from pagedlab.core.block_pool import FreeKVCacheBlockQueue, KVCacheBlock
from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.differential import differential
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.viz.pictures import render_queue_rows

# --- instrumented blocks ----------------------------------------------------------------------------
# the slot descriptors of the real attributes (class access would give the descriptor; mypy types it
# as the instance attribute, hence the lookup in the class dict)
_PREV: MemberDescriptorType = vars(KVCacheBlock)["prev_free_block"]
_NEXT: MemberDescriptorType = vars(KVCacheBlock)["next_free_block"]


class _Counter:
    n = 0


def _counted(slot: MemberDescriptorType) -> Any:
    """A property over the real slot ``slot`` that counts every read and write in ``_Counter.n``."""

    def get(block: KVCacheBlock) -> KVCacheBlock | None:
        _Counter.n += 1
        return slot.__get__(block)

    def set_(block: KVCacheBlock, value: KVCacheBlock | None) -> None:
        _Counter.n += 1
        slot.__set__(block, value)

    return property(get, set_)


class CountingBlock(KVCacheBlock):
    """A ``KVCacheBlock`` that counts every read/write of its links and every ``==`` on it."""

    __slots__ = ()

    prev_free_block = _counted(_PREV)
    next_free_block = _counted(_NEXT)

    def __eq__(self, other: object) -> bool:
        _Counter.n += 1
        return self is other

    __hash__ = KVCacheBlock.__hash__


def _raw_prev(b: Any) -> Any:
    return _PREV.__get__(b) if isinstance(b, KVCacheBlock) else getattr(b, "prev_free_block", None)


def _raw_next(b: Any) -> Any:
    return _NEXT.__get__(b) if isinstance(b, KVCacheBlock) else getattr(b, "next_free_block", None)


class Pool:
    """The blocks a test created; reads the queue through the links, never through the learner's API."""

    def __init__(self, n: int, counting: bool = False) -> None:
        cls = CountingBlock if counting else KVCacheBlock
        self.blocks = [cls(i) for i in range(n)]
        self._ids = {id(b): b.block_id for b in self.blocks}

    def bid(self, obj: Any) -> Any:
        """Block id of one of our blocks; otherwise a description of what it is."""
        if obj is None:
            return None
        if self._is_ours(obj):
            return self._ids[id(obj)]
        return f"<not one of the pool's blocks: {type(obj).__name__}>"

    def _is_ours(self, obj: Any) -> bool:
        i = self._ids.get(id(obj))
        return i is not None and self.blocks[i] is obj

    def walk(self) -> list[int]:
        """Queue order from the links: start at the block whose prev is not one of ours (when several
        are, at the one the head sentinel they point to links next: the others are stale or mislinked)."""
        linked = [b for b in self.blocks if _raw_prev(b) is not None or _raw_next(b) is not None]
        fronts = [b for b in linked if not self._is_ours(_raw_prev(b))]
        if len(fronts) != 1:
            heads = {id(p): p for b in fronts if (p := _raw_prev(b)) is not None}
            starts = [n for p in heads.values() for n in [_raw_next(p)] if any(n is f for f in fronts)]
            if len(starts) != 1:
                return []
            fronts = starts
        out, seen, b = [], set(), fronts[0]
        while self._is_ours(b) and b.block_id not in seen:
            seen.add(b.block_id)
            out.append(b.block_id)
            b = _raw_next(b)
        return out

    def state(self, q: Any) -> dict[str, Any]:
        order = self.walk()
        linked = sorted(b.block_id for b in self.blocks if _raw_prev(b) is not None or _raw_next(b) is not None)
        fronts = sorted(
            b.block_id
            for b in self.blocks
            if (_raw_prev(b) is not None or _raw_next(b) is not None) and not self._is_ours(_raw_prev(b))
        )
        back_broken = [
            order[i + 1]
            for i in range(len(order) - 1)
            if _raw_prev(self.blocks[order[i + 1]]) is not self.blocks[order[i]]
        ]
        ends_none = [i for i in order if _raw_prev(self.blocks[i]) is None or _raw_next(self.blocks[i]) is None]
        try:
            nfree = q.num_free_blocks
        except Exception as e:  # noqa: BLE001
            nfree = f"<error reading num_free_blocks: {type(e).__name__}>"
        return {
            "num_blocks": len(self.blocks),
            "queue": order,
            "linked": linked,
            "fronts": fronts,
            "back_broken": back_broken,
            "ends_none": ends_none,
            "num_free_blocks": nfree,
        }


def _queue_render(state: dict[str, Any], expected: dict[str, Any] | None, path: Any) -> str:
    got = state.get("queue", [])
    bad = None
    if expected is not None:
        exp = expected.get("queue", [])
        bad = next((i for i, (a, b) in enumerate(zip(got, exp)) if a != b), None)
        if bad is None and len(got) != len(exp):
            bad = min(len(got), len(exp)) if len(got) > len(exp) else None
    title = "free queue, front (LRU) on the left"
    rows = [("queue", got, bad)]
    outside = [i for i in range(state.get("num_blocks", 0)) if i not in got]
    rows.append(("not in queue", outside, None))
    return render_queue_rows(rows, title=title)


FQ = register(
    Exercise(
        "02.free_queue",
        "FreeKVCacheBlockQueue",
        "the free list of KV blocks: doubly linked, O(1) popleft / append / remove, prepend_n",
        reference=lambda: FreeKVCacheBlockQueue,
        render=_queue_render,
        components=("free_queue", "allocator", "block_pool"),
    )
)


@FQ.invariant("a block leaving the queue has both links cleared")
def _(s: dict[str, Any]) -> str | None:
    stale = [i for i in s["linked"] if i not in s["queue"]]
    if len(s["fronts"]) > 1 and any(i not in s["queue"] for i in s["fronts"]):
        return (
            f"blocks {s['fronts']} each look like the front of the queue (their prev_free_block is not a queued "
            "block): a block taken out still has links, or the links are broken"
        )
    if stale:
        return (
            f"block {stale[0]} is not in the queue, but its prev_free_block/next_free_block are still set; "
            "set both to None when a block leaves the queue"
        )
    return None


@FQ.invariant("queued blocks are linked both ways")
def _(s: dict[str, Any]) -> str | None:
    if s["back_broken"]:
        b = s["back_broken"][0]
        return f"block {b}'s prev_free_block does not point back to the block before it in the queue"
    if s["ends_none"]:
        return (
            f"block {s['ends_none'][0]} is queued but one of its links is None; put sentinel blocks "
            "(KVCacheBlock(-1)) at both ends so every queued block has a prev and a next"
        )
    return None


@FQ.invariant("num_free_blocks counts the queued blocks")
def _(s: dict[str, Any]) -> str | None:
    n = s["num_free_blocks"]
    if type(n) is not int or n != len(s["queue"]):
        msg = f"the queue holds {len(s['queue'])} blocks but num_free_blocks is {n!r}"
        if not s["linked"] and type(n) is int and n > 0:
            msg += (
                " - the check reads the queue through the blocks' own prev_free_block / next_free_block "
                "links, and no block has them set: keep the queue as a doubly linked list through the blocks "
                "(a Python list or deque makes remove O(n) and leaves the links empty)"
            )
        return msg
    return None


_ORDER_HINT = "the queue order must be the order blocks were freed in: oldest at the front"
_LIFO_HINT = (
    "popleft() must return the FRONT block: the one freed longest ago (LRU). "
    "append() adds at the back, so the queue is first-in first-out"
)


def _prepend_hint(blocks: list[int]) -> Any:
    """The hint of the queue after ``prepend_n(blocks)``: it names how the order went wrong."""

    def hint(expected: Any, got: Any, state: Any) -> str:
        k = len(blocks)
        if isinstance(got, list) and k > 1 and got[:k] == blocks[::-1]:
            return (
                f"prepend_n({blocks}) keeps the order given: blocks[0] becomes the front. Your queue starts "
                f"{got[:k]}, the blocks reversed (putting them at the front one at a time does that)"
            )
        if isinstance(got, list) and k and got[-k:] == blocks:
            return f"prepend_n({blocks}) puts the blocks at the FRONT of the queue, not at the back"
        return f"after prepend_n({blocks}) the queue starts with exactly those blocks, then the old front"

    return hint


def _show_queue(q: Any, pool: Pool, rec: Any, what: str, hint: Any) -> None:
    """Record the pool's state and observe the queue's order, front first, as ``what``."""
    st = pool.state(q)
    rec.state(st)
    rec.observe(what, st["queue"], hint=hint)


def _popleft_raises(q: Any, pool: Pool, rec: Any, step: str, hint: str) -> None:
    """Record ``q.popleft()`` on an empty queue, which must raise ``ValueError``."""
    rec.step(step)
    rec.expect_raises("what popleft() does", q.popleft, (ValueError,), hint=hint)
    rec.state(pool.state(q))


def _op(q: Any, pool: Pool, rec: Any, op: str, arg: Any = None, hint: Any = None) -> None:
    if op == "popleft":
        rec.step("q.popleft()")
        rec.observe("block returned", pool.bid(q.popleft()), hint=hint or _LIFO_HINT)
    elif arg is None:
        raise ValueError(f"_op({op!r}) needs a block index")
    elif op == "prepend_n":
        ids = list(arg)
        rec.step(f"q.prepend_n(blocks {ids})")
        q.prepend_n([pool.blocks[i] for i in ids])
        _show_queue(q, pool, rec, "free queue, front first", _prepend_hint(ids))
        return
    elif op == "append":
        rec.step(f"q.append(block {arg})")
        q.append(pool.blocks[arg])
    else:
        rec.step(f"q.remove(block {arg})")
        q.remove(pool.blocks[arg])
    _show_queue(q, pool, rec, "free queue, front first", _ORDER_HINT)


def _new(Queue: Any, pool: Pool, rec: Any, ids: Sequence[int]) -> Any:
    rec.step(f"q = FreeKVCacheBlockQueue(blocks {list(ids)})")
    q = Queue([pool.blocks[i] for i in ids])
    _show_queue(q, pool, rec, "free queue, front first", "the blocks given, in the order given")
    return q


@FQ.test("a new queue holds the blocks given, in order")
def _(Queue: Any, rec: Any) -> None:
    pool = Pool(6)
    _new(Queue, pool, rec, range(6))
    pool2 = Pool(5)
    _new(Queue, pool2, rec, [3, 0, 4])


@FQ.test("popleft hands out the least recently used block; append adds at the back")
def _(Queue: Any, rec: Any) -> None:
    pool = Pool(5)
    q = _new(Queue, pool, rec, range(5))
    for op, arg in [
        ("popleft", None),
        ("popleft", None),
        ("append", 0),
        ("popleft", None),
        ("popleft", None),
        ("append", 3),
        ("append", 1),
        ("popleft", None),
        ("popleft", None),
        ("popleft", None),
    ]:
        _op(q, pool, rec, op, arg)


@FQ.test("remove takes a block from the middle, the front or the back")
def _(Queue: Any, rec: Any) -> None:
    pool = Pool(6)
    q = _new(Queue, pool, rec, range(6))
    for op, arg in [
        ("remove", 3),
        ("remove", 0),
        ("remove", 5),
        ("append", 3),
        ("remove", 1),
        ("popleft", None),
        ("remove", 3),
        ("append", 0),
        ("remove", 4),
        ("remove", 0),
    ]:
        _op(q, pool, rec, op, arg)


@FQ.test("prepend_n puts blocks at the front, in the order given")
def _(Queue: Any, rec: Any) -> None:
    pool = Pool(8)
    q = _new(Queue, pool, rec, range(4))
    for op, arg in [
        ("prepend_n", [6]),
        ("prepend_n", [5, 7, 4]),
        ("prepend_n", []),
        ("popleft", None),
        ("remove", 7),
        ("append", 7),
        ("popleft", None),
        ("popleft", None),
        ("remove", 0),
        ("prepend_n", [0, 5]),
    ]:
        _op(q, pool, rec, op, arg)
    for _ in range(6):
        _op(q, pool, rec, "popleft")
    emptied: list[tuple[str, Any]] = [("prepend_n", []), ("prepend_n", [2, 7]), ("append", 4), ("prepend_n", [1])]
    for op, arg in emptied:
        _op(q, pool, rec, op, arg)  # onto the emptied queue


@FQ.test("popleft on an empty queue raises ValueError")
def _(Queue: Any, rec: Any) -> None:
    pool = Pool(2)
    q = _new(Queue, pool, rec, range(2))
    _op(q, pool, rec, "popleft")
    _op(q, pool, rec, "popleft")
    hint = "raise ValueError (or a subclass) when there is no free block; never return None"
    _popleft_raises(q, pool, rec, "q.popleft() on an empty queue", hint)
    _op(q, pool, rec, "append", 1)
    _op(q, pool, rec, "popleft")


@FQ.test("an empty queue: popleft raises, then blocks can be appended")
def _(Queue: Any, rec: Any) -> None:
    pool = Pool(3)
    q = _new(Queue, pool, rec, [])
    hint = "a queue created from no blocks is empty: popleft raises ValueError"
    _popleft_raises(q, pool, rec, "q.popleft() on a queue created empty", hint)
    for op, arg in [
        ("append", 2),
        ("append", 0),
        ("popleft", None),
        ("remove", 0),
        ("prepend_n", []),
        ("prepend_n", [0, 2]),
        ("append", 1),
        ("popleft", None),
    ]:
        _op(q, pool, rec, op, arg)


@FQ.test("get_all_free_blocks lists the queue front first")
def _(Queue: Any, rec: Any) -> None:
    pool = Pool(5)
    q = _new(Queue, pool, rec, range(5))
    _op(q, pool, rec, "remove", 2)
    _op(q, pool, rec, "append", 2)
    rec.step("q.get_all_free_blocks()")
    listed = q.get_all_free_blocks()
    observe_contract(rec, contracts.GET_ALL_FREE_BLOCKS, listed)
    rec.observe("blocks listed", [pool.bid(b) for b in listed])
    hint = "get_all_free_blocks only reads: walk the links from the head, do not pop the blocks"
    _show_queue(q, pool, rec, "free queue after listing it", hint)


@FQ.test("300 random operations, step by step against vLLM's queue")
def _(Queue: Any, rec: Any) -> None:
    rng = random.Random(2024)
    pool = Pool(12)
    q = _new(Queue, pool, rec, range(12))
    inside = list(range(12))  # the test's own model, only to pick legal operations
    for _ in range(300):
        r = rng.random()
        if inside and r < 0.35:
            _op(q, pool, rec, "popleft")
            inside.pop(0)
        elif inside and r < 0.6:
            b = rng.choice(inside)
            _op(q, pool, rec, "remove", b)
            inside.remove(b)
        else:
            out = [i for i in range(12) if i not in inside]
            if not out:
                continue
            if r < 0.8:
                b = rng.choice(out)
                _op(q, pool, rec, "append", b)
                inside.append(b)
            else:  # vLLM 0.32's free of blocks without a hash: several at once, at the front
                some = rng.sample(out, rng.randint(0, min(3, len(out))))
                _op(q, pool, rec, "prepend_n", some)
                inside[:0] = some


@FQ.test("every operation is O(1): it touches a constant number of blocks")
def _(Queue: Any, rec: Any) -> None:
    for n in (16, 1024):
        pool = Pool(n, counting=True)
        q = Queue(list(pool.blocks))
        for label, fn in [
            ("q.popleft()", lambda: q.popleft()),
            (f"q.remove(block {n // 2})", lambda: q.remove(pool.blocks[n // 2])),
            ("q.append(block 0)", lambda: q.append(pool.blocks[0])),
            (f"q.remove(block {n - 1})", lambda: q.remove(pool.blocks[n - 1])),
            ("q.popleft()", lambda: q.popleft()),
            (
                f"q.prepend_n(blocks [{n // 2}, {n - 1}])",
                lambda: q.prepend_n([pool.blocks[n // 2], pool.blocks[n - 1]]),
            ),
        ]:
            rec.step(f"{label} on a queue of {n} blocks")
            _Counter.n = 0
            fn()
            rec.observe(
                "link reads/writes and == comparisons",
                _Counter.n,
                at_most=16,
                hint="walking the list (or list.remove / `in` on a Python list) costs O(n); "
                "use the block's own prev/next links to unlink it",
            )


# --- differential tests (random cases against the reference, pagedlab.grading.differential) ------------
# 02.free_queue: what the hand-written tests never build - several queues alive at once (the engine keeps
# a GPU and a CPU pool), operations interleaved between them, every queue's whole state compared after
# every operation on any of them, the lists given (BlockPool.blocks, the freed blocks) compared after the
# call, get_all_free_blocks's type, and num_free_blocks read on long queues (the scheduler reads it every
# step).
_FQ_KINDS = ("popleft", "remove", "append", "prepend_n", "get_all_free_blocks", "num_free_blocks")


def _fq_case() -> Any:
    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        queues: list[list[Any]] = []
        inside: list[list[int]] = []
        for _ in range(draw(st.integers(1, 3))):
            n = draw(st.sampled_from([0, 1, 2, 3, 5, 8, 12, 40, 40]))
            if draw(st.booleans()):
                ids = list(range(n))  # as BlockPool builds its queue: every block, in id order
            else:
                ids = draw(st.permutations(range(n)))[: draw(st.integers(0, n))]
            queues.append([n, list(ids)])
            inside.append(list(ids))
        ops: list[list[Any]] = []
        for _ in range(draw(st.integers(0, 24))):
            qi = draw(st.integers(0, len(queues) - 1))
            ins = inside[qi]
            out = [b for b in range(queues[qi][0]) if b not in ins]
            kind = draw(st.sampled_from(_FQ_KINDS))
            if kind == "popleft":
                ops.append([qi, kind, None])
                del ins[:1]
            elif kind == "remove" and ins:
                b = draw(st.sampled_from(ins))
                ops.append([qi, kind, b])
                ins.remove(b)
            elif kind == "append" and out:
                b = draw(st.sampled_from(out))
                ops.append([qi, kind, b])
                ins.append(b)
            elif kind == "prepend_n":
                some = draw(st.permutations(out))[: draw(st.integers(0, min(3, len(out))))]
                ops.append([qi, kind, list(some)])
                ins[:0] = some
            elif kind in ("get_all_free_blocks", "num_free_blocks"):
                ops.append([qi, kind, None])
        return {"queues": queues, "ops": ops}

    return case()


def _describe_fq(case: dict[str, Any]) -> str:
    pools = ", ".join(f"q{i + 1} over pool {i + 1} ({_n(n, 'block')})" for i, (n, _) in enumerate(case["queues"]))
    return f"{pools}; {_n(len(case['ops']), 'operation')}"


def _popleft_hint(expected: Any, got: Any, state: Any) -> str:
    if got == "returns a block that is not one of its own":
        return (
            "popleft() handed out a block that is not one of this queue's own blocks: does another queue share "
            "its sentinel blocks? Create them in __init__ (self....), one pair per queue, not as class attributes"
        )
    if expected == "raises ValueError":
        return "raise ValueError (or a subclass) when there is no free block; never return None"
    return "this queue holds blocks: popleft() hands out its front block"


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _fq_states(queues: list[Any], pools: list[Pool], rec: Any, hint: Any) -> None:
    """Record every queue's whole state: its order through the links and its num_free_blocks."""
    for i, (q, pool) in enumerate(zip(queues, pools), 1):
        st_ = pool.state(q)
        rec.state(st_)
        rec.observe(f"q{i}, front first", st_["queue"], hint=hint)
        rec.observe(f"q{i}.num_free_blocks", st_["num_free_blocks"])


def _fq_popleft(q: Any, pool: Pool, name: str, rec: Any) -> None:
    """``q.popleft()``: what it does (raises / returns one of its blocks / another's), and the block."""
    rec.step(f"{name}.popleft()")
    _Counter.n = 0
    try:
        got = pool.bid(q.popleft())
    except ValueError:
        outcome, got = "raises ValueError", None
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001 - recorded as what popleft() does
        outcome, got = f"raises {type(e).__name__}", None
    else:
        outcome = "returns one of its blocks" if type(got) is int else "returns a block that is not one of its own"
    rec.observe("what popleft() does", outcome, hint=_popleft_hint)
    if type(got) is int:
        rec.observe("block returned", got, hint=_LIFO_HINT)


def _fq_op(q: Any, pool: Pool, name: str, op: str, arg: Any, rec: Any) -> Any:
    """One operation on queue ``q`` (its step, cost and result recorded); returns the hint of the orders after it."""
    if op == "prepend_n":
        ids = list(arg)
        rec.step(f"{name}.prepend_n(blocks {ids})")
        given = [pool.blocks[i] for i in ids]
        _Counter.n = 0
        before = snapshot(contracts.FREE_QUEUE_MUTATES, **{"the blocks given to prepend_n": ids})
        q.prepend_n(given)
        rec.observe("link reads/writes and == comparisons", _Counter.n, at_most=16 + 4 * len(ids), hint=_O1_HINT)
        after = [pool.bid(b) for b in given]
        observe_read_only(rec, contracts.FREE_QUEUE_MUTATES, before, **{"the blocks given to prepend_n": after})
        return _prepend_hint(ids)
    if op == "popleft":
        _fq_popleft(q, pool, name, rec)
    elif op == "remove":
        rec.step(f"{name}.remove(block {arg})")
        _Counter.n = 0
        q.remove(pool.blocks[arg])
    elif op == "append":
        rec.step(f"{name}.append(block {arg})")
        _Counter.n = 0
        q.append(pool.blocks[arg])
    elif op == "get_all_free_blocks":
        rec.step(f"{name}.get_all_free_blocks()")
        listed = q.get_all_free_blocks()
        observe_contract(rec, contracts.GET_ALL_FREE_BLOCKS, listed)
        rec.observe("blocks listed", [pool.bid(b) for b in listed])
        return "get_all_free_blocks only reads: walk the links from the head, do not pop the blocks"
    else:
        rec.step(f"{name}.num_free_blocks on a queue of {_n(len(pool.walk()), 'block')}")
        _Counter.n = 0
        rec.observe(f"{name}.num_free_blocks", q.num_free_blocks)
        rec.observe(
            "link reads/writes and == comparisons to read it",
            _Counter.n,
            at_most=16,
            hint="the scheduler reads num_free_blocks at every step: keep a count that each operation updates; "
            "counting the blocks by walking the list is O(n) per read",
        )
        return _ORDER_HINT
    rec.observe("link reads/writes and == comparisons", _Counter.n, at_most=16, hint=_O1_HINT)
    return _ORDER_HINT


_O1_HINT = "walking the list (or list.remove / `in` on a Python list) costs O(n); use the block's own prev/next links to unlink it"


@differential(
    FQ,
    _fq_case(),
    examples=60,
    describe=_describe_fq,
    draws="1-3 queues alive at once, each over its own pool of 0-40 blocks (all in id order as BlockPool builds it, "
    "or any subset in any order), 0-24 legal operations interleaved between them (popleft also when empty, remove, "
    "append, prepend_n of 0-3, get_all_free_blocks, num_free_blocks)",
)
def _(Queue: Any, case: dict[str, Any], rec: Any) -> None:
    pools: list[Pool] = []
    queues: list[Any] = []
    for i, (n, ids) in enumerate(case["queues"], 1):
        pool = Pool(n, counting=True)
        given = [pool.blocks[b] for b in ids]
        rec.step(f"q{i} = FreeKVCacheBlockQueue(blocks {ids}) over pool {i} ({_n(n, 'block')})")
        before = snapshot(contracts.FREE_QUEUE_MUTATES, **{"the blocks given to __init__": ids})
        q = Queue(given)
        pools.append(pool)
        queues.append(q)
        after = [pool.bid(b) for b in given]
        observe_read_only(rec, contracts.FREE_QUEUE_MUTATES, before, **{"the blocks given to __init__": after})
        _fq_states(queues, pools, rec, "the blocks given, in the order given")
    for qi, op, arg in case["ops"]:
        hint = _fq_op(queues[qi], pools[qi], f"q{qi + 1}", op, arg, rec)
        _fq_states(queues, pools, rec, hint)
