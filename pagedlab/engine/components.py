"""The engine's teachable parts as named slots, the kit's implementation in each, and the guards
that run a learner's implementation inside the real engine.

Each slot is one idea a lab teaches, behind a small interface (a ``typing.Protocol``). The engine
is assembled from a :class:`Components` object that holds one implementation per slot, the kit's
by default::

    from pagedlab.engine.components import Components
    comps = Components.kit().plug("slot_mapping", my_slot_mapping)
    llm = LLM(components=comps)            # the engine now computes slots with my_slot_mapping

Notebooks use ``pagedlab.grading.my_engine()`` instead, which plugs in every exercise that passed
its ``check()`` (see :mod:`pagedlab.grading.plug`).

=================  ============================================  =========================================
slot               interface                                     where the engine calls it
=================  ============================================  =========================================
``free_queue``     :class:`FreeQueue` (class, built from blocks)  ``BlockPool.free_block_queue``
``slot_mapping``   :class:`SlotMappingFn`                         ``ModelRunner.forward`` (per request)
``schedule_step``  :class:`ScheduleStepFn`                        :class:`LearnerStepScheduler.schedule`
                   or :class:`PreemptingStep` (lab 06)            :class:`LearnerPreemptingScheduler.schedule`
``pick_victim``    :class:`PickVictimFn`                          ``Scheduler._pick_victim``
``prefix_lookup``  :class:`PrefixLookupFn`                        ``KVCacheManager.get_computed_blocks``
``kv_tile_load``   :class:`KVTileLoadFn`                          ``tiled_decode_attention`` (decode)
``triton_tile_load`` lab 08's ``@triton.jit`` tile load            the Triton decode kernel (``"triton"`` only)
``preempt_retry``  :class:`PreemptRetryFn`                        ``Scheduler.schedule`` (running requests)
``fork_cow``       :class:`ForkCowFns` (lab 03 ``fork`` /        ``KVCacheManager.fork``, one-token append
                   ``append_token``)                              of ``allocate_slots`` (:class:`GuardedForkCow`)
``radix``          :class:`RadixOps` (lab 07 ``match_prefix`` /   the tree of ``RadixPrefixCache``
                   ``insert`` / ``evict``)                        (:class:`GuardedRadixTree`)
=================  ============================================  =========================================

Guards (only around a learner's part; a kit part runs unwrapped, so the checks cost nothing when
only kit parts run): a part that raises, returns the wrong type, runs past ``time_limit_s``,
changes state it does not own or breaks an invariant raises :class:`~pagedlab.errors.ComponentError`
naming the slot, the engine step and the invariant. The engine then aborts the step's requests
(as for any failed step) and switches that slot back to the kit's part, so it stays usable.
"""

from __future__ import annotations

import numbers
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

import torch

from pagedlab.core.block_pool import BlockHash, BlockPool, FreeKVCacheBlockQueue, KVCacheBlock
from pagedlab.core.copy_on_write import CopyOnWrite
from pagedlab.core.kv_cache_manager import KVCacheManager, KVCacheSlots, find_longest_cache_hit
from pagedlab.core.radix_cache import RadixCache
from pagedlab.errors import ComponentError
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.request import Request, RequestStatus
from pagedlab.sched.scheduler import ScheduledRequest, Scheduler, SchedulerOutput, pick_victim

__all__ = [
    "SLOTS",
    "Slot",
    "Part",
    "Components",
    "FreeQueue",
    "SlotMappingFn",
    "ScheduleStepFn",
    "PickVictimFn",
    "PrefixLookupFn",
    "KVTileLoadFn",
    "PreemptRetryFn",
    "RadixOps",
    "ForkCowFns",
    "GuardedRadixTree",
    "GuardedForkCow",
    "kit_slot_mapping",
    "load_kv_tile",
    "LearnerStepScheduler",
    "LearnerPreemptingScheduler",
    "GuardedTritonTileLoad",
    "PreemptingStep",
    "Guard",
]


# --- the interfaces -------------------------------------------------------------------------------
class FreeQueue(Protocol):
    """The free-block queue of lab 02 (vLLM 0.11 ``FreeKVCacheBlockQueue``): built from the initial
    blocks (front first), links threaded through ``prev_free_block`` / ``next_free_block``."""

    num_free_blocks: int

    def popleft(self) -> KVCacheBlock: ...
    def remove(self, block: KVCacheBlock) -> None: ...
    def append(self, block: KVCacheBlock) -> None: ...
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
    its slots (``Scheduler._plugged_preempt_retry`` calls it). Lab 06's exercise writes this loop
    inside a whole step (``06.schedule_with_preemption``, which covers this slot); a function of this
    shape can also be plugged in alone."""

    def __call__(
        self,
        request: Request,
        allocate: Callable[[], bool],
        choose_victim: Callable[[], Request],
        preempt: Callable[[Request], None],
    ) -> bool: ...


# --- the kit's implementations (the ones not already in core/sched) ------------------------------
def kit_slot_mapping(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
    """``block_table[pos // block_size] * block_size + pos % block_size`` per position (vLLM's slot mapping)."""
    return [block_table[p // block_size] * block_size + p % block_size for p in positions]


def load_kv_tile(
    cache: torch.Tensor, block_table: torch.Tensor, tile_start: int, tile_size: int, seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The decode kernel's tile load (as :class:`KVTileLoadFn`): masked lanes (``pos >= seq_len``)
    read zeros and never index ``block_table``."""
    block_size = cache.shape[1]
    pos = tile_start + torch.arange(tile_size)
    mask = pos < seq_len
    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))
    rows = cache[block_table[logical], pos % block_size]
    return torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype)), mask


def preempt_and_retry(
    request: Request,
    allocate: Callable[[], bool],
    choose_victim: Callable[[], Request],
    preempt: Callable[[Request], None],
) -> bool:
    """The kit's preempt-and-retry loop (vLLM 0.11 ``Scheduler.schedule``, running requests): while the
    allocation fails, preempt the chosen victim; stop when it succeeds or ``request`` itself was the victim."""
    while not allocate():
        preempt(choose_victim())
        if request.status != RequestStatus.RUNNING:
            return False
    return True


@dataclass(frozen=True)
class Slot:
    """One slot: its name, what it does, the exercises that fill it, and whether the engine calls it."""

    name: str
    what: str
    exercises: tuple[str, ...]
    kit: Any
    plugged: bool = True


SLOTS: dict[str, Slot] = {
    s.name: s
    for s in (
        Slot("free_queue", "free-block queue (LRU, O(1) remove)", ("02.free_queue",), FreeKVCacheBlockQueue),
        Slot("slot_mapping", "token position -> KV slot", ("02.slot_mapping",), kit_slot_mapping),
        Slot("fork_cow", "fork + copy-on-write append", ("03.fork", "03.append_token"), CopyOnWrite),
        Slot(
            "schedule_step",
            "scheduling step (admission, budget, chunking)",
            ("06.schedule_with_preemption", "05.schedule_with_budget", "04.schedule_step"),
            Scheduler,
        ),
        Slot("pick_victim", "victim choice", ("06.pick_victim",), pick_victim),
        Slot("preempt_retry", "preempt-and-retry loop", ("06.schedule_with_preemption",), preempt_and_retry),
        Slot("prefix_lookup", "prefix-cache lookup (hash chain)", ("07.get_computed_blocks",), find_longest_cache_hit),
        Slot("radix", "radix match / insert / evict", ("07.match_prefix", "07.insert", "07.evict"), RadixCache),
        Slot("kv_tile_load", "decode kernel K/V tile load", ("08.load_kv_tile",), load_kv_tile),
        Slot("triton_tile_load", "Triton decode kernel's K/V tile load", ("08.triton_load_kv_tile",), None),
    )
}


@dataclass(frozen=True)
class Part:
    """What fills one slot: ``impl`` and whose it is (``"kit"`` or ``"yours"``); ``note`` says why."""

    slot: str
    impl: Any
    owner: str = "kit"
    note: str = ""


@dataclass(frozen=True)
class Components:
    """One implementation per slot (see the module docstring).

    Attributes:
        parts: slot name -> :class:`Part`.
        time_limit_s: seconds one call of a learner's part may take (0 = no limit); enforced with
            ``SIGALRM`` on the main thread only.
        render: optional ``render(slot, state) -> svg`` drawing the state where a guard tripped
            (the grading layer passes ``pagedlab.viz`` pictures in; the engine cannot import them).
    """

    parts: Mapping[str, Part]
    time_limit_s: float = 5.0
    render: Callable[[str, dict[str, Any]], str] | None = field(default=None, compare=False)

    @classmethod
    def kit(cls) -> Components:
        """Every slot filled with the kit's implementation."""
        return cls({name: Part(name, s.kit) for name, s in SLOTS.items()})

    def plug(self, slot: str, impl: Any, note: str = "") -> Components:
        """A copy with ``impl`` (the learner's) in ``slot``.

        Raises:
            KeyError: unknown slot (the message lists them).
            ValueError: the engine does not call that slot yet.
        """
        if slot not in SLOTS:
            raise KeyError(f"unknown component slot {slot!r}; slots: {', '.join(SLOTS)}")
        if not SLOTS[slot].plugged:
            raise ValueError(f"the engine does not run a plugged-in {slot} yet (the kit's part is used)")
        if impl is None:
            raise ValueError(f"slot {slot}: got None instead of an implementation")
        return replace(self, parts={**self.parts, slot: Part(slot, impl, "yours", note)})

    def with_kit(self, slot: str, note: str = "") -> Components:
        """A copy with the kit's part back in ``slot``."""
        return replace(self, parts={**self.parts, slot: Part(slot, SLOTS[slot].kit, "kit", note)})

    def is_yours(self, slot: str) -> bool:
        return self.parts[slot].owner == "yours"

    def covered(self, slot: str) -> str | None:
        """Why a learner's part in another slot does ``slot``'s work (its ``covers``), else None:
        lab 06's preempting step fills ``schedule_step`` and also preempts, retries and picks victims."""
        for part in self.parts.values():
            why = getattr(part.impl, "covers", {}).get(slot) if part.owner == "yours" else None
            if isinstance(why, str):
                return why
        return None

    def owner(self, slot: str) -> str:
        """``"yours"`` when a learner's part fills or covers ``slot``, else ``"kit"``."""
        return "yours" if self.is_yours(slot) or self.covered(slot) else "kit"

    @property
    def learner_slots(self) -> list[str]:
        """The slots whose work a learner's part does (filled or covered)."""
        return [s for s in self.parts if self.owner(s) == "yours"]

    def table(self) -> str:
        """Plain-text table: slot, whose part, what it does, note."""
        w = max(len("component"), *map(len, self.parts)) + 1
        rows = [f"{'component':<{w}} {'whose':<6} what"]
        for name, part in self.parts.items():
            slot = SLOTS[name]
            why = self.covered(name) or part.note  # covered: another part of yours does this slot's work
            note = f"  ({why})" if why else ("  (kit only for now)" if not slot.plugged else "")
            rows.append(f"{name:<{w}} {self.owner(name):<6} {slot.what}{note}")
        return "\n".join(rows)

    def guard(self, slot: str, step: Callable[[], int]) -> Guard:
        """A :class:`Guard` for ``slot``; ``step()`` gives the current engine step."""
        return Guard(slot, step, self.time_limit_s, self.render)


# --- guards ---------------------------------------------------------------------------------------
class _TimeUp(BaseException):
    """Raised by the alarm handler inside a learner's part that ran out of time."""


@dataclass
class Guard:
    """Calls one learner part and turns every misbehaviour into a :class:`ComponentError`."""

    slot: str
    step: Callable[[], int]
    time_limit_s: float = 5.0
    render: Callable[[str, dict[str, Any]], str] | None = None

    def fail(self, invariant: str, detail: str = "", state: dict[str, Any] | None = None) -> ComponentError:
        """The error to raise (with a picture of ``state`` when a renderer is set)."""
        picture = ""
        if state is not None and self.render is not None:
            try:
                picture = self.render(self.slot, state)
            except Exception:  # noqa: BLE001 - a picture must never hide the real error
                picture = ""
        return ComponentError(self.slot, self.step(), invariant, detail, picture)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` under the time limit; any exception becomes a ComponentError."""
        # An outer timer (an enclosing part's limit, pytest-timeout's signal method) keeps running: ours
        # is armed only when it would fire first, and the outer one is re-armed with what it had left.
        outer_left, outer_interval = (0.0, 0.0)
        if hasattr(signal, "getitimer"):
            outer_left, outer_interval = signal.getitimer(signal.ITIMER_REAL)
        use_alarm = (
            self.time_limit_s > 0
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and (outer_left == 0 or outer_left > self.time_limit_s)
        )
        old: Any = None
        started = time.monotonic()
        if use_alarm:

            def on_alarm(signum: int, frame: object) -> None:
                raise _TimeUp()

            old = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.time_limit_s)
        try:
            result = fn(*args)
            took = time.monotonic() - started
            if self.time_limit_s > 0 and took > self.time_limit_s:  # it caught the alarm (a bare except?)
                raise self.fail(
                    f"it took {took:.1f} s, over the {self.time_limit_s:g} s limit (a bare except: "
                    "around a loop swallows the time-limit signal)"
                )
            return result
        except _TimeUp:
            raise self.fail(f"it did not return within {self.time_limit_s:g} s (an endless loop?)") from None
        except ComponentError:
            raise
        except Exception as e:
            raise self.fail(f"it raised {type(e).__name__}: {e}") from e
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
                if outer_left > 0:
                    left = max(outer_left - (time.monotonic() - started), 1e-3)
                    signal.setitimer(signal.ITIMER_REAL, left, outer_interval)

    def expect_type(self, value: Any, types: type | tuple[type, ...], what: str) -> None:
        if not isinstance(value, types):
            names = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
            raise self.fail(f"it returned {type(value).__name__} for {what}, expected {names}")


# --- contract checks the guards share (issue 23: what the exercises state, beyond the results) -------
def check_changed_in_place(guard: Guard, what: str, given: Any, after: Any) -> None:
    """``after`` must be the very object ``given``: the part changes it in place, the engine holds it.

    Raises:
        ComponentError: the part bound a new object instead.
    """
    if after is not given:
        raise guard.fail(
            f"it bound a new object to {what} instead of changing the one it was given in place (the engine "
            "keeps that one, so the change would be lost)"
        )


def check_same_dtype(guard: Guard, what: str, got: torch.Tensor, source: torch.Tensor) -> None:
    """``got`` keeps ``source``'s dtype (a tile of an fp16 cache is fp16).

    Raises:
        ComponentError: it does not.
    """
    if got.dtype != source.dtype:
        raise guard.fail(f"{what} is {got.dtype}, but the cache is {source.dtype}: a tile keeps the cache's dtype")


def check_batch_order(guard: Guard, running: Sequence[Request], scheduled: Sequence[Request]) -> None:
    """The scheduled requests come in the order they run (``running``'s order: oldest first, then the
    admitted ones), as the exercises state and the engine batches them.

    Raises:
        ComponentError: two scheduled requests are in the other order.
    """
    place = {id(r): i for i, r in enumerate(running)}
    order = [place[id(r)] for r in scheduled if id(r) in place]
    for a, b in zip(order, order[1:]):
        if b < a:
            raise guard.fail(
                f"it scheduled {running[b].request_id} before {running[a].request_id}, which runs ahead of it: "
                "walk the running requests in order, oldest first"
            )


# --- guarded learner parts, one per slot ----------------------------------------------------------
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

    Invariants: a handed-out block is out of the queue (both links None) and unused (``ref_cnt 0``);
    a removed block's neighbours are linked to each other; an appended block sits at the tail,
    linked both ways; ``num_free_blocks`` moves by exactly one per block.
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
        block = self.guard.call(self.inner.popleft)
        self.guard.expect_type(block, KVCacheBlock, "popleft()")
        if block.block_id < 0:
            raise self.guard.fail("popleft() handed out a sentinel block (id -1)", state=_queue_state(self.inner))
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

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        blocks = self.guard.call(self.inner.get_all_free_blocks)
        self.guard.expect_type(blocks, list, "get_all_free_blocks()")
        return list(blocks)


def free_queue_factory(
    cls: Callable[[list[KVCacheBlock]], FreeQueue], guard: Guard
) -> Callable[[list[KVCacheBlock]], Any]:
    """``BlockPool``'s queue factory for a learner's queue class: build it, check it holds every block."""

    def build(blocks: list[KVCacheBlock]) -> GuardedFreeQueue:
        queue = guard.call(cls, blocks)
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
        if table != list(block_table) or pos != list(positions):
            raise guard.fail("it changed the block table or positions it was given (the engine owns them)")
        guard.expect_type(out, (list, tuple), "the slots")
        if len(out) != len(positions):
            raise guard.fail(f"{len(out)} slots for {len(positions)} positions")
        held = set(block_table)
        for p, slot in zip(positions, out):
            if isinstance(slot, bool) or not isinstance(slot, numbers.Integral):  # numpy ints are fine, as in check()
                guard.expect_type(slot, int, f"the slot of position {p}")
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


def guarded_pick_victim(fn: PickVictimFn, guard: Guard) -> Callable[[list[Request], str], Request]:
    """``fn`` checked: returns one of the running requests and leaves the list as it was."""

    def state(r: Request) -> tuple[Any, ...]:
        return (r.status, r.num_computed_tokens, r.num_tokens, r.priority, r.arrival_time)

    def call(running: list[Request], policy: str) -> Request:
        before, states = list(running), [state(r) for r in running]
        victim = guard.call(fn, running, policy)
        if len(running) != len(before) or any(a is not b for a, b in zip(running, before)):
            running[:] = before
            raise guard.fail("it changed the running list (return the victim; the scheduler removes it)")
        changed = [r.request_id for r, st in zip(running, states) if state(r) != st]
        if changed:
            raise guard.fail(
                f"it changed request {changed[0]} (status, num_computed_tokens, ...): choosing a victim only "
                "reads the requests; the scheduler preempts it"
            )
        if not any(victim is r for r in running):
            raise guard.fail(f"it returned {victim!r}, which is not one of the running requests")
        chosen: Request = victim
        return chosen

    return call


def guarded_preempt_retry(fn: PreemptRetryFn, guard: Guard) -> PreemptRetryFn:
    """``fn`` checked: preempts only running requests, only after a failed allocation, never after the
    request itself went; returns True exactly when the request runs with its slots allocated."""

    def call(
        request: Request,
        allocate: Callable[[], bool],
        choose_victim: Callable[[], Request],
        preempt: Callable[[Request], None],
    ) -> bool:
        last: list[bool | None] = [None]

        def alloc() -> bool:
            if request.status != RequestStatus.RUNNING:
                raise guard.fail(f"it allocated for {request.request_id} after preempting it")
            last[0] = allocate()
            return bool(last[0])

        def pre(victim: Request) -> None:
            if not isinstance(victim, Request) or victim.status != RequestStatus.RUNNING:
                raise guard.fail(f"it preempted {victim!r}, which is not a running request")
            if request.status != RequestStatus.RUNNING or last[0] is not False:
                raise guard.fail(
                    "it preempted without a failed allocation just before (or after the request itself was preempted)"
                )
            preempt(victim)
            last[0] = None

        ok = guard.call(fn, request, alloc, choose_victim, pre)
        guard.expect_type(ok, bool, "whether the request got its slots")
        running = request.status == RequestStatus.RUNNING
        if running and last[0] is not True:
            raise guard.fail(
                f"it returned while {request.request_id} still runs without its slots "
                "(retry until allocate() succeeds or the request itself is preempted)"
            )
        if ok != running:
            raise guard.fail(
                f"it returned {ok}, but {request.request_id} is {'running with its slots' if running else 'preempted'}"
            )
        checked: bool = ok
        return checked

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


def guarded_kv_tile_load(fn: KVTileLoadFn, guard: Guard) -> KVTileLoadFn:
    """``fn`` checked against the kit's :func:`load_kv_tile`, lane by lane, on every call.

    The engine calls it once per step and tile (``pagedlab.model.attention.plan_tile_loads``, on a
    cache of slot numbers: the rows it returns are the slots each lane reads), so a wrong lane is
    named by the slot it read.
    """

    def call(
        cache: torch.Tensor, block_table: torch.Tensor, tile_start: int, tile_size: int, seq_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        table_copy = block_table.clone()  # the learner's function reads copies: the engine's stay as they are
        cache_copy = cache.clone() if cache.numel() <= 1 << 22 else cache  # the engine's slot cache is small
        got = guard.call(fn, cache_copy, table_copy, tile_start, tile_size, seq_len)
        cache_same = cache_copy is cache or bool(((cache_copy == cache) | (cache_copy.isnan() & cache.isnan())).all())
        if not torch.equal(table_copy, block_table) or not cache_same:
            raise guard.fail("it wrote into the block table or the cache it was given (a tile load only reads)")
        if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)):
            raise guard.fail(f"it returned {type(got).__name__}, expected a (rows, mask) pair of tensors")
        rows, mask = got
        want_rows, want_mask = load_kv_tile(cache, block_table, tile_start, tile_size, seq_len)
        if rows.shape != want_rows.shape or mask.shape != want_mask.shape:
            raise guard.fail(
                f"shapes {tuple(rows.shape)}, {tuple(mask.shape)}; expected "
                f"{tuple(want_rows.shape)}, {tuple(want_mask.shape)}"
            )
        if mask.dtype != torch.bool:
            raise guard.fail(f"the mask is {mask.dtype}, expected torch.bool (the kernel selects lanes with it)")
        check_same_dtype(guard, "the tile", rows, cache)
        if not torch.equal(mask, want_mask):
            raise guard.fail(f"the mask must be pos < seq_len ({seq_len}) for positions from {tile_start}")
        bad = (rows != want_rows).flatten(1).any(1).nonzero().flatten().tolist()
        if bad:
            lane = bad[0]
            why = (
                "a masked lane (past the sequence) is not zero: stale KV leaks"
                if not want_mask[lane]
                else "a lane read the wrong slot of the cache"
            )
            where = f"lane {lane}, position {tile_start + lane}, seq_len {seq_len}"
            if cache.shape[2:] == (1, 1):  # the engine's cache of slot numbers: name the slots
                want = int(want_rows[lane].sum()) - 1
                where += f"; it read slot {int(rows[lane].sum()) - 1}, " + (
                    f"the block table says slot {want}" if want >= 0 else "a masked lane reads none"
                )
            raise guard.fail(f"{why} ({where})")
        return rows, mask

    return call


# --- radix (lab 07) and fork_cow (lab 03): the learner's functions on the engine's own state ------
@dataclass(frozen=True)
class RadixOps:
    """What fills the ``radix`` slot: lab 07's ``match_prefix(root, key, now)``, ``insert(root, key,
    value, now)`` and ``evict(root, num_tokens)``, with the learner kit's tree helpers they work on
    (``new_tree``, ``lock``, ``unlock`` of ``pagedlab.grading.kit``; passed in because the engine sits
    below the kit). ``yours``: which of the three functions are the learner's (the rest are the
    references); :meth:`merge` combines two partial fillings."""

    match_prefix: Callable[[Any, list[Any], int], tuple[list[int], Any]]
    insert: Callable[[Any, list[Any], list[int], int], int]
    evict: Callable[[Any, int], list[int]]
    new_tree: Callable[[], Any]
    lock: Callable[[Any], None]
    unlock: Callable[[Any], None]
    yours: frozenset[str] = frozenset()

    def merge(self, other: RadixOps) -> RadixOps:
        """``self`` with ``other``'s learner functions taking their places."""
        return replace(self, **{n: getattr(other, n) for n in other.yours}, yours=self.yours | other.yours)


def _walk_tree(root: Any, limit: int = 100_000) -> list[Any]:
    """Every node under ``root`` (root first); stops at ``limit`` nodes (a cycle)."""
    nodes: list[Any] = []
    stack = [root]
    while stack and len(nodes) < limit:
        node = stack.pop()
        nodes.append(node)
        stack.extend(getattr(node, "children", {}).values())
    return nodes


class GuardedRadixTree:
    """The engine's radix tree (:class:`~pagedlab.core.prefix_cache.RadixTree`) run by a learner's
    lab 07 functions on ``TreeNode``s (the class ``RadixCache`` uses too), checked after every call.

    Pages as tokens: the engine caches whole blocks, so each element of a key is one block of tokens
    (a tuple, prefixed by the request's namespace when it has one) and each value is that block's id;
    lab 07's page-size-1 code then works unchanged (SGLang keys pages by tuples the same way).

    Invariants checked (the guard names the slot, the step and the broken one, with the tree):
    the links (``child.parent is node``, children keyed by ``key[0]``, no empty key), one value per
    key element; a match is a path from the root spelling a prefix of the key, its values those of
    the path; an insert leaves the whole key in the tree with the new values after the span that was
    present, and returns that span; an eviction removes only unlocked nodes (whole subtrees), frees
    exactly their values, and frees enough while unlocked nodes remain.

    Args:
        ops: the functions (:class:`RadixOps`).
        page_size: tokens per block.
        guard: the ``radix`` guard.
    """

    def __init__(self, ops: RadixOps, page_size: int, guard: Guard) -> None:
        self.ops, self.page_size, self.guard = ops, page_size, guard
        self.reset()

    def reset(self) -> None:
        """An empty tree (the kit's ``new_tree``)."""
        self.root = self.ops.new_tree()
        self._clock = 0

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _pages(self, key: Sequence[int], extra_key: Hashable | None) -> list[Hashable]:
        p = self.page_size
        pages: list[Hashable] = [tuple(key[i : i + p]) for i in range(0, len(key) // p * p, p)]
        return pages if extra_key is None else [(extra_key, page) for page in pages]

    def _slots(self, block_ids: list[int]) -> list[int]:
        return [b * self.page_size + j for b in block_ids for j in range(self.page_size)]

    def _fail(self, invariant: str) -> ComponentError:
        hint = (
            f"\n(in the engine each key element is a page: a tuple of {self.page_size} token ids, compared "
            "with ==, so code that works only on single ints, e.g. through numpy arrays, breaks here)"
        )
        return self.guard.fail(invariant, detail=hint + "\n" + _format_nodes(self.root), state={"root": self.root})

    def _check_links(self, op: str) -> list[Any]:
        nodes = _walk_tree(self.root)
        for node in nodes:
            if node is not self.root and (not node.key or len(node.key) != len(node.value)):
                raise self._fail(
                    f"after {op}, node {node!r} has {len(node.key)} key elements and {len(node.value)} values "
                    "(one value per token, never an empty key)"
                )
            for k, child in node.children.items():
                if child.parent is not node or not child.key or k != child.key[0]:
                    raise self._fail(f"after {op}, the link between {node!r} and its child {child!r} is broken")
        return nodes

    def _path(self, node: Any) -> tuple[list[Any], list[int]] | None:
        """Keys and values from the root down to ``node``; None when ``node`` is not in this tree."""
        keys: list[Any] = []
        values: list[int] = []
        for _ in range(100_000):
            if node is self.root:
                return keys, values
            if node is None or not hasattr(node, "key"):
                return None
            keys[:0], values[:0] = list(node.key), list(node.value)
            node = node.parent
        return None

    def _peek(self, pages: list[Hashable]) -> list[int]:
        """The values of the longest cached prefix of ``pages``, changing nothing."""
        node, values, i = self.root, [], 0
        while i < len(pages) and pages[i] in node.children:
            child = node.children[pages[i]]
            n = 0
            while n < len(child.key) and i + n < len(pages) and child.key[n] == pages[i + n]:
                n += 1
            values += child.value[:n]
            i += n
            if n < len(child.key):
                break
            node = child
        return values

    def match_prefix(self, key: Sequence[int], extra_key: Hashable | None = None) -> tuple[list[int], Any]:
        """``ops.match_prefix`` on the block-pages of ``key``; returns per-token slots and the last node."""
        pages = self._pages(key, extra_key)
        got = self.guard.call(self.ops.match_prefix, self.root, list(pages), self._tick())
        if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], list)):
            raise self._fail(f"match_prefix returned {type(got).__name__}, expected (value list, last node)")
        value, node = got
        self._check_links("match_prefix")
        path = self._path(node)
        if path is None:
            raise self._fail(f"match_prefix returned {node!r} as the last node, which is not in the tree")
        if path[0] != pages[: len(path[0])] or path[1] != value:
            raise self._fail(
                f"match_prefix returned {len(value)} values and a node whose path spells {len(path[0])} "
                "elements: the matched prefix is not a prefix of the key, or its values are not the path's"
            )
        if len(value) != len(self._peek(pages)):
            raise self._fail(
                f"match_prefix matched {len(value)} elements; the longest cached prefix has {len(self._peek(pages))}"
            )
        return self._slots(value), node

    def insert(self, key: Sequence[int], value: Sequence[int] | None = None, extra_key: Hashable | None = None) -> int:
        """``ops.insert`` of the block-pages of ``key`` with their block ids; returns tokens already present."""
        pages = self._pages(key, extra_key)
        slots = list(value) if value is not None else list(key)
        ids = [s // self.page_size for s in slots[: len(pages) * self.page_size : self.page_size]]
        present = self._peek(pages)
        n = self.guard.call(self.ops.insert, self.root, list(pages), list(ids), self._tick())
        self.guard.expect_type(n, int, "the tokens already present")
        self._check_links("insert")
        after = self._peek(pages)
        if n != len(present):
            raise self._fail(f"insert returned {n}, but {len(present)} leading elements of the key were in the tree")
        if after != present + ids[len(present) :]:
            raise self._fail("after insert the key is not in the tree with the old values, then the new ones")
        inserted: int = n * self.page_size
        return inserted

    def inc_lock_ref(self, node: Any) -> int:
        """The kit's ``lock`` (the engine asks for no size change back)."""
        self.ops.lock(node)
        return 0

    def dec_lock_ref(self, node: Any) -> int:
        """The kit's ``unlock``."""
        self.ops.unlock(node)
        return 0

    def evictable_size(self) -> int:
        """Tokens in unlocked nodes (each evictable once its children go)."""
        return sum(len(n.key) for n in _walk_tree(self.root) if n is not self.root and n.lock_ref == 0) * self.page_size

    def evict(self, num_tokens: int, evict_callback: Callable[[list[int]], Any]) -> int:
        """``ops.evict`` for ``num_tokens`` (whole blocks); hands the freed slots to ``evict_callback``."""
        want = -(-num_tokens // self.page_size)
        before = {id(n): n for n in _walk_tree(self.root)}
        locked = {id(n): n.lock_ref for n in before.values()}
        freed = self.guard.call(self.ops.evict, self.root, want)
        self.guard.expect_type(freed, list, "the freed slots")
        after = {id(n) for n in self._check_links("evict")}
        removed = [n for i, n in before.items() if i not in after]
        bad = [n for n in removed if locked[id(n)] > 0]
        if bad:
            raise self._fail(f"evict removed {bad[0]!r}, which is locked (a running request uses it)")
        if sorted(freed) != sorted(v for n in removed for v in n.value):
            raise self._fail(
                f"evict returned {len(freed)} freed slots that are not the values of the {len(removed)} removed nodes"
            )
        if len(freed) < want and self.evictable_size():
            raise self._fail(f"evict freed {len(freed)} of {want} elements while unlocked leaves remain")
        if freed:
            evict_callback(self._slots(freed))
        return len(freed) * self.page_size


def _format_nodes(root: Any) -> str:
    """One line per node, indented by depth (the tree where a radix guard tripped)."""
    lines: list[str] = []
    stack = [(c, 0) for c in getattr(root, "children", {}).values()]
    while stack and len(lines) < 40:
        node, depth = stack.pop()
        lines.append(f"{'  ' * depth}{len(node.key)} blocks -> {list(node.value)} lock={node.lock_ref}")
        stack.extend((c, depth + 1) for c in node.children.values())
    return "tree:\n" + ("\n".join(lines) or "(empty)")


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


class GuardedForkCow:
    """The engine's fork and one-token append (:class:`~pagedlab.core.copy_on_write.ForkCowOps`) run by
    lab 03's functions on a ``RefCountedPool`` view of the real block pool and a ``Seq`` view of the
    request's block table, checked after every call.

    Invariants: fork allocates nothing, leaves the parent as it was, gives the child the parent's table
    and length, and adds exactly one reference per block; append keeps every block before the last,
    adds a block exactly when the token starts one, copies the last block exactly when it is shared
    (the pair is (old, new)), leaves the block the token goes into unshared (``ref_cnt == 1``), and
    moves reference counts and the free count by exactly that.

    Args:
        fns: the functions (:class:`ForkCowFns`).
        block_pool: the engine's device pool.
        block_size: tokens per block.
        guard: the ``fork_cow`` guard.
    """

    def __init__(self, fns: ForkCowFns, block_pool: BlockPool, block_size: int, guard: Guard) -> None:
        self.fns, self.block_pool, self.block_size, self.guard = fns, block_pool, block_size, guard

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
        parent = self.fns.seq(parent_id, list(ids), num_tokens)
        child = self.guard.call(self.fns.fork, self.fns.pool_view(self.block_pool, self.block_size), parent, child_id)
        if parent.block_table != ids or parent.num_tokens != num_tokens:
            raise self._fail("fork changed the parent (its table or length)", ids, parent)
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
        check_changed_in_place(self.guard, "the sequence's block table", given, getattr(seq, "block_table", None))
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


class GuardedTritonTileLoad:
    """Lab 08's ``@triton.jit`` tile load run inside the kit's Triton decode kernel (``load_tile=`` of
    ``kernels.decode_attention.paged_decode_attention``, a ``tl.constexpr``), checked after every call
    against the kit's PyTorch reference decode: the kernel's lanes cannot be watched one by one, so a
    wrong block, a wrong row or a stale (NaN) slot shows as a different output, named here.

    ``decode_attention`` has the decode contract of ``pagedlab.model.attention`` (``ModelRunner`` uses
    it, on the ``"triton"`` backend only; the engine picks it in ``_install_components``).
    """

    #: The largest difference from the reference tolerated (fp32 sums in another order).
    ATOL = 1e-3

    def __init__(self, fn: Any, guard: Guard) -> None:
        self.fn, self.guard = fn, guard

    def __call__(
        self, cache: torch.Tensor, block_table: torch.Tensor, tile_start: int, tile_size: int, seq_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The PyTorch tile-load protocol (:class:`KVTileLoadFn`) with the kit's :func:`load_kv_tile`: the
        learner's Triton load runs only inside the kernel (:meth:`decode_attention`)."""
        return load_kv_tile(cache, block_table, tile_start, tile_size, seq_len)

    def decode_attention(self, query: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
        """``[num_seqs, num_q_heads, head_dim]`` from the kit's kernel with the learner's tile load
        (``kv``: the cache, block tables and lengths, ``pagedlab.kernels.paged_kv``).

        Raises:
            ComponentError: the kernel raised (a compile error in the tile load, a bad layout), or
                its output is not finite or differs from the reference by more than ``ATOL``.
        """
        from pagedlab.kernels.decode_attention import paged_decode_attention
        from pagedlab.kernels.reference import paged_decode_attention as reference

        def run() -> torch.Tensor:
            out: torch.Tensor = paged_decode_attention(query, kv, scale, load_tile=self.fn)
            return out

        got: torch.Tensor = self.guard.call(run)
        want = reference(query, kv, scale)
        if not torch.isfinite(got).all():
            raise self.guard.fail("the decode output holds NaN/inf: masked lanes must load 0.0 (a stale slot leaks)")
        err = float((got - want).abs().max()) if got.numel() else 0.0
        if err > self.ATOL:
            raise self.guard.fail(
                f"the decode output differs from the reference by {err:.3g}: a lane read the wrong block or row"
            )
        return got


def takes_token_budget(step_fn: Any) -> bool:
    """Whether a ``schedule_step`` part is given the token budget: lab 05's step is; lab 04's (bridged,
    ``takes_token_budget = False``) and lab 06's (:class:`PreemptingStep`) are not."""
    return bool(getattr(step_fn, "takes_token_budget", True))


class LearnerStepScheduler(Scheduler):
    """The engine's scheduler with a learner's :class:`ScheduleStepFn` as its step.

    The step gets the real ``running`` list, a deque of the waiting requests and the real
    ``KVCacheManager``; afterwards the admitted requests leave the real waiting queue. It must
    not preempt, so the engine gives it a pool large enough for its requests (``my_engine`` does).
    Checked after every step: the running list only grew at its end, by the head of the waiting
    queue in order; ``num_computed_tokens`` untouched; each scheduled request runs and is scheduled
    1 .. missing tokens; the budget (for a step given it) and ``max_num_seqs`` hold; every scheduled token has a
    KV slot.

    Args (besides ``Scheduler``'s):
        step_fn: the learner's step (the lab 04 signature is bridged by ``pagedlab.grading.plug``).
        guard: the ``schedule_step`` guard.
    """

    def __init__(self, *args: Any, step_fn: ScheduleStepFn, guard: Guard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step_fn, self.guard = step_fn, guard

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput(step=self.step_count)
        if self.tracer is not None:
            self.tracer.step = self.step_count
        cfg = self.config
        before, waiting = list(self.running), deque(self.waiting)
        computed = {id(r): r.num_computed_tokens for r in [*before, *waiting]}
        result = self.guard.call(
            self.step_fn,
            self.running,
            waiting,
            self.kv_cache_manager,
            cfg.max_num_seqs,
            cfg.max_num_batched_tokens,
            cfg.long_prefill_token_threshold,
        )
        self.guard.expect_type(result, dict, "the scheduled tokens")
        self._admit(before)
        if any(computed[id(r)] != r.num_computed_tokens for r in [*before, *waiting]):
            raise self.guard.fail("it changed num_computed_tokens (the engine advances it after the step)")
        scheduled = [self._scheduled(rid, n) for rid, n in result.items()]
        check_batch_order(self.guard, self.running, [s.request for s in scheduled])
        budget = self._budget_left(scheduled)
        if len(self.running) > cfg.max_num_seqs:
            raise self.guard.fail(f"{len(self.running)} requests run > max_num_seqs={cfg.max_num_seqs}")
        return self._finish_schedule(out, scheduled, budget)

    def _budget_left(self, scheduled: list[ScheduledRequest]) -> int | None:
        """What the step left of ``max_num_batched_tokens``; None for a step that is not given the budget
        (:func:`takes_token_budget`): it is not held to a setting it never sees.

        Raises:
            ComponentError: a step given the budget scheduled more tokens than it holds.
        """
        if not takes_token_budget(self.step_fn):
            return None
        total, limit = sum(s.num_tokens for s in scheduled), self.config.max_num_batched_tokens
        if total > limit:
            raise self.guard.fail(f"token budget exceeded: {total} tokens > max_num_batched_tokens={limit}")
        return limit - total

    def _admit(self, before: list[Request]) -> None:
        """Move the requests the step appended to ``running`` out of the real waiting queue."""
        if len(self.running) < len(before) or any(a is not b for a, b in zip(self.running, before)):
            self.running[:] = before
            raise self.guard.fail("it removed or reordered running requests (only append admitted ones)")
        for req in self.running[len(before) :]:
            if not len(self.waiting) or self.waiting.peek_request() is not req:
                del self.running[len(before) :]
                raise self.guard.fail(
                    f"{req.request_id} was admitted out of order or was not waiting "
                    "(admit the head of the waiting queue first)"
                )
            self.waiting.pop_request()
            req.status = RequestStatus.RUNNING
            if req.num_cached_tokens < 0:
                req.num_cached_tokens = 0

    def _scheduled(self, rid: object, n: object) -> ScheduledRequest:
        """The ScheduledRequest for one entry of the step's result, checked."""
        req = self.requests.get(rid) if isinstance(rid, str) else None
        if req is None or not isinstance(rid, str) or req not in self.running:
            raise self.guard.fail(f"it scheduled {rid!r}, which is not a running request")
        if not isinstance(n, int) or not 1 <= n <= req.num_tokens - req.num_computed_tokens:
            raise self.guard.fail(
                f"{rid}: {n!r} tokens scheduled, expected 1 .. "
                f"{req.num_tokens - req.num_computed_tokens} (its missing tokens)"
            )
        end, bs = req.num_computed_tokens + n, self.cache_config.block_size
        held = len(self.kv_cache_manager.get_block_ids(rid))
        if held * bs < end:
            full = self.kv_cache_manager.block_pool.get_num_free_blocks() == 0
            why = (
                " The pool is full: a step from lab 04/05 assumes every request fits; give the engine more "
                "num_gpu_blocks, or plug lab 06's schedule_with_preemption, which preempts."
                if full
                else ""
            )
            raise self.guard.fail(
                f"request {rid!r}: tokens up to {end} are scheduled but its blocks hold only {held * bs} "
                f"(was allocate_slots called for it, and did it succeed?){why}",
                state={
                    "request": rid,
                    "blocks": self.kv_cache_manager.get_block_ids(rid),
                    "tokens": end,
                    "block_size": bs,
                },
            )
        return ScheduledRequest(req, req.num_computed_tokens, n)


@dataclass(frozen=True)
class PreemptingStep:
    """Lab 06's whole step with preemption in the ``schedule_step`` slot (run by
    :class:`LearnerPreemptingScheduler`): ``fn(running, waiting, swapped, kv_cache_manager,
    max_num_seqs, policy, preemption_mode) -> ({request_id: tokens}, [preempted ids in order])``,
    ``waiting`` and ``swapped`` being deques (exercise ``06.schedule_with_preemption``)."""

    fn: Callable[..., tuple[dict[str, int], list[str]]]

    #: It is not given max_num_batched_tokens, so it is not held to it (:func:`takes_token_budget`).
    takes_token_budget: ClassVar[bool] = False

    #: Slots whose work this step does itself (the kit's parts there stay unused): see ``Components.owner``.
    covers: ClassVar[dict[str, str]] = {
        "preempt_retry": "in your schedule_with_preemption: it preempts, frees or swaps, and retries itself",
        "pick_victim": "in your schedule_with_preemption: it chooses its victims itself",
    }

    @property
    def __name__(self) -> str:
        return str(getattr(self.fn, "__name__", "schedule_with_preemption"))


class _RecordingKV:
    """The ``KVCacheManager`` as a preempting step sees it: every call goes through, and the block
    moves of ``swap_out`` / ``swap_in`` (which the step does not return) are kept for the model runner,
    pending copy-on-write copies first, as ``Scheduler._preempt`` does."""

    def __init__(self, kv: KVCacheManager, out: SchedulerOutput) -> None:
        self._kv, self._out = kv, out
        self.swapped_out: list[str] = []
        self.swapped_in: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    def swap_out(self, requests: list[Request]) -> list[tuple[int, int]]:
        self._out.add_moves("copy", self._kv.take_pending_copies())
        moves = self._kv.swap_out(requests)
        self._out.add_moves("swap_out", moves)
        self.swapped_out += [r.request_id for r in requests]
        return moves

    def swap_in(self, requests: list[Request]) -> list[tuple[int, int]]:
        self._out.add_moves("copy", self._kv.take_pending_copies())
        moves = self._kv.swap_in(requests)
        self._out.add_moves("swap_in", moves)
        self.swapped_in += [r.request_id for r in requests]
        return moves


class LearnerPreemptingScheduler(LearnerStepScheduler):
    """The engine's scheduler with lab 06's ``schedule_with_preemption`` (a :class:`PreemptingStep`) as its step.

    The step gets the real ``running`` list, deques of the waiting and swapped requests and the
    ``KVCacheManager`` (swap moves recorded for the model runner). Checked after every step, besides
    :class:`LearnerStepScheduler`'s checks (budget, ``max_num_seqs``, a KV slot for every scheduled
    token): each preempted request ran before the step and runs no more; a recomputed one holds no
    block and has ``num_computed_tokens`` 0, a swapped one went through ``swap_out`` and holds no GPU
    block; nothing was admitted or swapped in during a step that preempted; swapped requests come
    back from the head of the swapped queue, in order. The kit then moves the victims in its own
    queues (recompute: the head of ``waiting``; swap: the end of ``swapped``).
    """

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput(step=self.step_count)
        if self.tracer is not None:
            self.tracer.step = self.step_count
        cfg, before = self.config, list(self.running)
        waiting, swapped = deque(self.waiting), deque(self.swapped)
        computed = {id(r): r.num_computed_tokens for r in [*before, *waiting, *swapped]}
        kv = _RecordingKV(self.kv_cache_manager, out)
        fn = self.step_fn.fn if isinstance(self.step_fn, PreemptingStep) else self.step_fn
        args = (self.running, waiting, swapped, kv, cfg.max_num_seqs, cfg.policy, cfg.preemption_mode)
        result = self.guard.call(fn, *args)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise self.guard.fail(f"it returned {type(result).__name__}, expected (scheduled, preempted)")
        sched, preempted = result
        self.guard.expect_type(sched, dict, "the scheduled tokens")
        self.guard.expect_type(preempted, list, "the preempted ids")
        victims = self._take_victims(before, preempted, kv, waiting, swapped, out)
        gone = {id(r) for r in victims}
        if any(
            computed[id(r)] != r.num_computed_tokens for r in computed_of(before, waiting, swapped) if id(r) not in gone
        ):
            raise self.guard.fail("it changed num_computed_tokens (the engine advances it after the step)")
        if not victims:
            self._admit(self._take_swapped_in(before, kv))
        elif [id(r) for r in self.running] != [id(r) for r in before if id(r) not in gone]:
            raise self.guard.fail("it admitted, swapped in or reordered requests in a step that preempted")
        scheduled = [self._scheduled(rid, n) for rid, n in sched.items()]
        check_batch_order(self.guard, self.running, [s.request for s in scheduled])
        budget = self._budget_left(scheduled)
        if len(self.running) > cfg.max_num_seqs:
            raise self.guard.fail(f"{len(self.running)} requests run > max_num_seqs={cfg.max_num_seqs}")
        return self._finish_schedule(out, scheduled, budget)

    def _take_victims(
        self,
        before: list[Request],
        preempted: list[Any],
        kv: _RecordingKV,
        waiting: deque[Request],
        swapped: deque[Request],
        out: SchedulerOutput,
    ) -> list[Request]:
        """Check each preempted request and move it in the kit's queues; return them."""
        victims: list[Request] = []
        for rid in preempted:
            req = next((r for r in before if r.request_id == rid), None)
            if req is None or any(v is req for v in victims):
                raise self.guard.fail(f"it preempted {rid!r}, which was not running (or twice)")
            if any(r is req for r in self.running):
                raise self.guard.fail(f"{rid} was preempted but is still in running")
            if self.kv_cache_manager.get_block_ids(rid):
                raise self.guard.fail(f"{rid} was preempted but still holds GPU blocks (free or swap_out it)")
            if rid in kv.swapped_out:
                if not any(r is req for r in swapped):
                    raise self.guard.fail(f"{rid} was swapped out but not appended to swapped")
                req.status = RequestStatus.SWAPPED
                self.swapped.append(req)
            else:
                if req.num_computed_tokens != 0 or not any(r is req for r in waiting):
                    raise self.guard.fail(
                        f"{rid} was freed for recompute but not reset (num_computed_tokens 0) and put back in waiting"
                    )
                req.status = RequestStatus.PREEMPTED
                self.waiting.prepend_request(req)
            req.num_preemptions += 1
            out.preempted.append(rid)
            victims.append(req)
        return victims

    def _take_swapped_in(self, before: list[Request], kv: _RecordingKV) -> list[Request]:
        """Move the requests the step swapped in (the head of ``swapped``, in order) to running; return
        ``before`` plus them (the start of the running list :meth:`_admit` checks)."""
        grown = list(before)
        for req in self.running[len(before) :]:
            if req.request_id not in kv.swapped_in:
                break
            if not self.swapped or self.swapped[0] is not req:
                raise self.guard.fail(f"{req.request_id} was swapped in out of order (the head of swapped first)")
            self.swapped.popleft()
            req.status = RequestStatus.RUNNING
            grown.append(req)
        return grown


def computed_of(*groups: Any) -> list[Request]:
    """The requests of ``groups`` (lists / deques), each once."""
    seen: dict[int, Request] = {}
    for g in groups:
        for r in g:
            seen.setdefault(id(r), r)
    return list(seen.values())


# --- assembling an engine -------------------------------------------------------------------------
@dataclass
class EngineParts:
    """What :func:`build_parts` hands the engine: constructor keywords and hooks, all guarded."""

    kv_kwargs: KVCacheSlots
    scheduler_cls: type[Scheduler]
    scheduler_kwargs: dict[str, Any]
    pick_victim_fn: Callable[[list[Request], str], Request] | None
    preempt_retry_fn: PreemptRetryFn | None
    slot_mapping_fn: SlotMappingFn | None
    kv_tile_load: KVTileLoadFn | None
    triton_tile_load: GuardedTritonTileLoad | None = None  # used instead of kv_tile_load on the "triton" backend


def build_parts(comps: Components, step: Callable[[], int], scheduler_cls: type[Scheduler]) -> EngineParts:
    """The engine's hooks for ``comps``: a learner's part wrapped in its guard, a kit part as None /
    the default (so kit parts run exactly the code they run without components)."""

    def g(slot: str) -> Guard:
        return comps.guard(slot, step)

    def mine(slot: str) -> Any:
        return comps.parts[slot].impl if comps.is_yours(slot) else None

    kv_kwargs: KVCacheSlots = {}
    if mine("free_queue") is not None:
        kv_kwargs["free_queue_factory"] = free_queue_factory(mine("free_queue"), g("free_queue"))
    if mine("prefix_lookup") is not None:
        kv_kwargs["prefix_lookup"] = guarded_prefix_lookup(mine("prefix_lookup"), g("prefix_lookup"))
    sched_kwargs: dict[str, Any] = {}
    if mine("schedule_step") is not None:
        preempting = isinstance(mine("schedule_step"), PreemptingStep)
        scheduler_cls = LearnerPreemptingScheduler if preempting else LearnerStepScheduler
        sched_kwargs = {"step_fn": mine("schedule_step"), "guard": g("schedule_step")}
    if mine("radix") is not None:
        radix_ops, radix_guard = mine("radix"), g("radix")
        kv_kwargs["radix_tree_factory"] = lambda page_size: GuardedRadixTree(radix_ops, page_size, radix_guard)
    if mine("fork_cow") is not None:
        cow_fns, cow_guard = mine("fork_cow"), g("fork_cow")
        kv_kwargs["fork_cow_factory"] = lambda pool, bs: GuardedForkCow(cow_fns, pool, bs, cow_guard)
    pv, sm, kt, pr = mine("pick_victim"), mine("slot_mapping"), mine("kv_tile_load"), mine("preempt_retry")
    return EngineParts(
        kv_kwargs,
        scheduler_cls,
        sched_kwargs,
        guarded_pick_victim(pv, g("pick_victim")) if pv is not None else None,
        guarded_preempt_retry(pr, g("preempt_retry")) if pr is not None else None,
        guarded_slot_mapping(sm, g("slot_mapping")) if sm is not None else None,
        guarded_kv_tile_load(kt, g("kv_tile_load")) if kt is not None else None,
        GuardedTritonTileLoad(mine("triton_tile_load"), g("triton_tile_load")) if mine("triton_tile_load") else None,
    )
