"""Contract checks the guards share: what the exercises state beyond their results (an object changed in
place, a dtype kept, the batch in running order). One function per contract, so a guard and an exercise
test that need the same rule call the same code.

What each part returns (types, shapes, dtypes) is one :class:`Returns` per part (``SLOT_MAPPING``, ``EVICT``,
...): its slot's guard enforces it when the part is plugged in, and its exercise's ``check()`` driver records
its verdict (``pagedlab.grading.contract.observe_contract``), so ``check()`` passes exactly the results the
engine accepts (a tuple or a tensor where a list is expected fails both, naming the contract).

What each part may change of what it is given (the inputs it only reads, the objects it changes in place) is one
:class:`Mutates` per part (``SLOT_MAPPING_MUTATES``, ...): its guard compares its copies against it and raises, its
exercise's ``check()`` driver records it (``pagedlab.grading.contract.observe_read_only`` /
``observe_in_place``), both naming the inputs and wording the rule from the same declaration."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pagedlab.core.block_pool import KVCacheBlock
from pagedlab.parts.guard import Guard
from pagedlab.request import Request
from pagedlab.sched.scheduler import pick_victim

__all__ = [
    "check_batch_order",
    "check_no_running_skipped",
    "check_victim_policy",
    "takes_token_budget",
    "Returns",
    "type_name",
    "GET_ALL_FREE_BLOCKS",
    "SLOT_MAPPING",
    "EVICT",
    "INSERT",
    "MATCH_PREFIX",
    "GET_COMPUTED_BLOCKS",
    "SCHEDULE_STEP",
    "SCHEDULE_WITH_PREEMPTION",
    "LOAD_KV_TILE",
    "FORK",
    "APPEND_TOKEN",
    "Mutates",
    "SLOT_MAPPING_MUTATES",
    "FORK_MUTATES",
    "APPEND_TOKEN_MUTATES",
    "PICK_VICTIM_MUTATES",
    "MATCH_PREFIX_MUTATES",
    "INSERT_MUTATES",
    "GET_COMPUTED_BLOCKS_MUTATES",
    "LOAD_KV_TILE_MUTATES",
    "SCHEDULE_STEP_MUTATES",
    "FREE_QUEUE_MUTATES",
]


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


def check_no_running_skipped(guard: Guard, running: Sequence[Request], scheduled: set[int]) -> None:
    """Of the requests that ran before the step and still run (``running``, in order), the scheduled ones
    (``id()``s in ``scheduled``) come first: the pass gives each running request its tokens in turn and, when
    it stops (the budget is spent, the request itself was preempted), leaves out only the ones after it.

    Raises:
        ComponentError: a running request was left out while one after it was scheduled.
    """
    for i, r in enumerate(running):
        later = next((x for x in running[i + 1 :] if id(x) in scheduled), None)
        if id(r) not in scheduled and later is not None:
            raise guard.fail(
                f"it skipped {r.request_id}, which runs ahead of {later.request_id} (scheduled): each running "
                "request gets its tokens in turn; a pass that stops leaves out only the requests after it"
            )


def check_victim_policy(guard: Guard, running: Sequence[Request], policy: str, victim: Request) -> None:
    """``victim`` is the request ``policy`` preempts among ``running`` (the kit's
    :func:`~pagedlab.sched.scheduler.pick_victim`: fcfs the end of the list, priority the largest
    ``(priority, arrival_time)``).

    Raises:
        ComponentError: another request was chosen.
    """
    want = pick_victim(list(running), policy)
    if victim is not want:
        rule = (
            "the largest (priority, arrival_time): a larger value is less important"
            if policy == "priority"
            else "the end of the running list, the request admitted last"
        )
        raise guard.fail(
            f"it preempted {victim.request_id}, but {policy!r} preempts {want.request_id} ({rule}) among "
            f"{[r.request_id for r in running]}"
        )


def takes_token_budget(step_fn: Any) -> bool:
    """Whether a ``schedule_step`` part is given the token budget: lab 05's step is; lab 04's (bridged,
    ``takes_token_budget = False``) and lab 06's (:class:`~pagedlab.parts.schedule.PreemptingStep`) are not."""
    return bool(getattr(step_fn, "takes_token_budget", True))


# --- what each part returns: one definition, read by its guard and by its exercise's check() ---------------
def _is(value: Any, cls: type) -> bool:
    """``isinstance(value, cls)``; for a grader's proxy of an object in a learner's process (``pagedlab grade``,
    ``containment.rpc``: it sets ``_pl_is_proxy`` and ``_pl_cls``), whether that object's class is ``cls``."""
    if getattr(type(value), "_pl_is_proxy", False):
        return str(object.__getattribute__(value, "_pl_cls")) == f"{cls.__module__}.{cls.__qualname__}"
    return isinstance(value, cls)


def type_name(value: Any) -> str:
    """``value``'s class name (a proxy's: the remote object's)."""
    if getattr(type(value), "_pl_is_proxy", False):
        return str(object.__getattribute__(value, "_pl_cls")).rsplit(".", 1)[-1]
    return type(value).__name__


def _int(x: Any) -> bool:
    """An int as the engine counts with it: ``int`` or a numpy integer, never a ``bool`` or a float."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool | np.bool_)


def _pyint(x: Any) -> bool:
    """A Python ``int`` (no ``bool``): for a number the engine keeps (a block id in a table, a token count)."""
    return isinstance(x, int) and not isinstance(x, bool)


def _list_of(value: Any, item_ok: Callable[[Any], bool], item: str) -> str | None:
    if not _is(value, list):
        return f"a {type_name(value)}, not a list"
    bad = next((x for x in value if not item_ok(x)), _NONE)
    return None if bad is _NONE else f"a list holding a {type_name(bad)} ({bad!r}), not only {item}"


def _pair(value: Any) -> str | None:
    if not _is(value, tuple):
        return f"a {type_name(value)}, not a tuple"
    return None if len(value) == 2 else f"a tuple of {len(value)} items, not 2"


_NONE = object()


@dataclass(frozen=True)
class Returns:
    """What one part returns, as the engine reads it: the part's name, what the value is, the contract in words
    and ``rule(value, **context)`` (None when the value keeps it, else what it is instead). The guard of the
    slot calls :meth:`enforce` when the part is plugged in; the exercise's ``check()`` driver records
    :meth:`verdict` (``grading.contract.observe_contract``), so both accept and refuse the same values."""

    part: str
    what: str
    expected: str
    rule: Callable[..., str | None]

    def problem(self, value: Any, **context: Any) -> str | None:
        """The broken contract in words, or None."""
        try:
            why = self.rule(value, **context)
        except Exception as e:  # noqa: BLE001 - a value that cannot even be read does not keep the contract
            why = f"a {type_name(value)} that cannot be read ({type(e).__name__})"
        if why is None:
            return None
        return f"{self.part} returned {why} for {self.what}; the contract of {self.part}: {self.expected}"

    def verdict(self, value: Any, **context: Any) -> str:
        """``"ok"``, or :meth:`problem`'s text."""
        return self.problem(value, **context) or "ok"

    def enforce(self, guard: Guard, value: Any, **context: Any) -> None:
        """Raises:
        ComponentError: ``value`` breaks the contract."""
        problem = self.problem(value, **context)
        if problem is not None:
            raise guard.fail(problem)


def _slots(value: Any) -> str | None:
    return _list_of(value, _int, "ints")


def _scheduled(value: Any) -> str | None:
    if not _is(value, dict):
        return f"a {type_name(value)}, not a dict"
    for k, n in dict.items(value) if isinstance(value, dict) else value.items():
        if not isinstance(k, str):
            return f"a dict with the key {k!r} ({type_name(k)}), not a request id (str)"
        if not _pyint(n):
            return f"a dict giving {k!r} {n!r} ({type_name(n)}), not a Python int number of tokens"
    return None


def _preempting(value: Any) -> str | None:
    why = _pair(value)
    if why is not None:
        return why
    sched, preempted = value
    why = _scheduled(sched)
    return (
        f"a tuple whose first item is {why}"
        if why is not None
        else (None if _is(preempted, list) else f"a tuple whose second item is a {type_name(preempted)}, not a list")
    )


def _lookup(value: Any, block_type: type) -> str | None:
    why = _pair(value)
    if why is not None:
        return why
    blocks, num = value
    why = _list_of(blocks, lambda b: _is(b, block_type), f"{block_type.__name__}s")
    if why is not None:
        return f"a tuple whose first item is {why}"
    return None if _int(num) else f"a tuple whose token count is a {type_name(num)} ({num!r}), not an int"


def _match(value: Any) -> str | None:
    why = _pair(value)
    if why is not None:
        return why
    why = _slots(value[0])
    return None if why is None else f"a tuple whose first item is {why}"


def _count(value: Any) -> str | None:
    return None if _int(value) else f"a {type_name(value)} ({value!r}), not an int"


def _copy(value: Any) -> str | None:
    if value is None:
        return None
    if not (_is(value, tuple) or _is(value, list)) or len(value) != 2:
        return f"a {type_name(value)}, not None or a (src, dst) pair"
    return None if all(_int(b) for b in value) else "a pair holding something other than two block ids (ints)"


def _child(value: Any) -> str | None:
    table = getattr(value, "block_table", _NONE)
    if table is _NONE:
        return f"a {type_name(value)} without a block_table"
    why = _list_of(table, _pyint, "block ids (Python ints)")
    return None if why is None else f"a child whose block_table is {why}"


def _tile(value: Any, cache: torch.Tensor, tile_size: int) -> str | None:
    why = _pair(value)
    if why is not None:
        return why
    rows, mask = value
    if not (isinstance(rows, torch.Tensor) and isinstance(mask, torch.Tensor)):
        return f"a tuple ({type_name(rows)}, {type_name(mask)}), not two tensors"
    want_rows, want_mask = (tile_size, *cache.shape[2:]), (tile_size,)
    if tuple(rows.shape) != want_rows or tuple(mask.shape) != want_mask:
        return f"tensors of shapes {tuple(rows.shape)}, {tuple(mask.shape)}, not {want_rows}, {want_mask}"
    if mask.dtype != torch.bool:
        return f"a {mask.dtype} mask, not torch.bool (a bool per lane: the kernel selects lanes with it)"
    if rows.dtype != cache.dtype:
        return (
            f"{rows.dtype} rows from a {cache.dtype} cache (the tile keeps the cache's dtype: make anything you mix "
            "into the rows of that dtype - zeros, or a mask you multiply by; a float32 operand turns an fp16 or "
            "bf16 tile into float32)"
        )
    return None


#: 02.free_queue's ``get_all_free_blocks`` (slot ``free_queue``).
GET_ALL_FREE_BLOCKS = Returns(
    "get_all_free_blocks",
    "the free blocks",
    "a list of KVCacheBlocks, front first",
    lambda value: _list_of(value, lambda b: _is(b, KVCacheBlock), "KVCacheBlocks"),
)
#: 02.slot_mapping (slot ``slot_mapping``).
SLOT_MAPPING = Returns("slot_mapping", "the slots", "a list of ints, one slot per position", _slots)
#: 07.evict (slot ``radix``).
EVICT = Returns(
    "evict",
    "the freed slots",
    "one flat list of ints: the slots freed, in eviction order (extend it with each evicted node's value)",
    _slots,
)
#: 07.insert (slot ``radix``).
INSERT = Returns("insert", "the tokens already cached", "an int", _count)
#: 07.match_prefix (slot ``radix``).
MATCH_PREFIX = Returns("match_prefix", "the match", "a tuple (value, last_node), value a list of ints", _match)
#: 07.get_computed_blocks (slot ``prefix_lookup``, through its bridge).
GET_COMPUTED_BLOCKS = Returns(
    "get_computed_blocks",
    "the hit",
    "a tuple (blocks, num_computed_tokens): a list of KVCacheBlocks, then an int",
    lambda value: _lookup(value, KVCacheBlock),
)
#: 04.schedule_step, 05.schedule_with_budget (slot ``schedule_step``).
SCHEDULE_STEP = Returns(
    "the step", "the scheduled tokens", "a dict {request_id (str): number of tokens (a Python int)}", _scheduled
)
#: 06.schedule_with_preemption (slot ``schedule_step``, as a ``PreemptingStep``).
SCHEDULE_WITH_PREEMPTION = Returns(
    "schedule_with_preemption",
    "(scheduled, preempted)",
    "a tuple (dict, list) - the scheduled dict {request_id (str): tokens (int)}, then the list of preempted ids",
    _preempting,
)
#: 08.load_kv_tile (slot ``kv_tile_load``); context: ``cache``, ``tile_size``.
LOAD_KV_TILE = Returns(
    "load_kv_tile",
    "(rows, mask)",
    "a tuple (rows, mask) of tensors: rows [tile_size, ...] of the cache's dtype, mask torch.bool [tile_size]",
    _tile,
)
#: 03.fork (slot ``fork_cow``).
FORK = Returns("fork", "the child", "a Seq whose block_table is a list of block ids (Python ints)", _child)
#: 03.append_token (slot ``fork_cow``).
APPEND_TOKEN = Returns("append_token", "the copy", "None, or the pair (src, dst) of block ids (ints)", _copy)


# --- what each part may change of its inputs: one definition, read by its guard and by its exercise's check() ---
def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@dataclass(frozen=True)
class Mutates:
    """What one part may change of what it is given: the inputs it only ``reads_only`` (a read-only list or tensor
    keeps its values; a read-only attribute, a dotted name such as ``parent.block_table``, keeps its object too) and the objects it
    changes ``in_place`` (the very object handed in, never a new one bound in its place: the engine keeps that
    one). ``why`` says why the engine cares. The slot's guard compares what it handed the part with its own copies
    and raises :meth:`changed` / :meth:`rebound` (:meth:`enforce_read_only`, :meth:`enforce_in_place`); the
    exercise's ``check()`` driver records the same comparison with the same names and wording
    (``grading.contract.observe_read_only`` / ``observe_in_place``), so both refuse the same calls."""

    part: str
    reads_only: tuple[str, ...] = ()
    in_place: tuple[str, ...] = ()
    why: str = "the engine keeps using what it handed in"

    @property
    def rule(self) -> str:
        """The rule in words, starting ``the mutation rule of <part>``: both sides' messages carry it."""
        said = []
        if self.reads_only:
            said.append(f"it only reads {_names(self.reads_only)}")
        if self.in_place:
            said.append(f"it changes {_names(self.in_place)} in place (the object it was given)")
        return f"the mutation rule of {self.part}: " + "; ".join(said) + f" - {self.why}"

    def _declared(self, name: str, names: tuple[str, ...]) -> None:
        if name not in names:
            raise KeyError(f"{self.part} declares no input {name!r} among {names}")

    def changed(self, name: str) -> str:
        """The message for the read-only input ``name``, changed (or rebound) by the part."""
        self._declared(name, self.reads_only)
        return (
            f"{self.part} changed {name}, which it only reads: work on a copy, or read it without changing it "
            f"(no sort/reverse/pop/clear/del/remove/assignment on it, no new object bound to it); {self.rule}"
        )

    def rebound(self, name: str) -> str:
        """The message for the in-place object ``name``, replaced by a new object."""
        self._declared(name, self.in_place)
        return (
            f"{self.part} bound a new object to {name} instead of changing the one it was given in place (append "
            f"to it, assign an item: the engine keeps that one, so the change would be lost); {self.rule}"
        )

    def enforce_read_only(self, guard: Guard, name: str, unchanged: bool) -> None:
        """Raises:
        ComponentError: ``unchanged`` is false (the guard's own comparison of ``name`` with its copy)."""
        self._declared(name, self.reads_only)
        if not unchanged:
            raise guard.fail(self.changed(name))

    def enforce_in_place(self, guard: Guard, name: str, given: Any, after: Any) -> None:
        """Raises:
        ComponentError: ``after`` is not the very object ``given``."""
        self._declared(name, self.in_place)
        if after is not given:
            raise guard.fail(self.rebound(name))


#: 02.free_queue (slot ``free_queue``): the list of blocks ``__init__`` and ``prepend_n`` are handed.
FREE_QUEUE_MUTATES = Mutates(
    "FreeKVCacheBlockQueue",
    reads_only=("the blocks given to __init__", "the blocks given to prepend_n"),
    why="the block pool keeps using the lists it hands in (BlockPool.blocks; the freed blocks it traces)",
)
#: 02.slot_mapping (slot ``slot_mapping``).
SLOT_MAPPING_MUTATES = Mutates(
    "slot_mapping", reads_only=("block_table", "positions"), why="the engine owns the request's table and positions"
)
#: 03.fork (slot ``fork_cow``).
FORK_MUTATES = Mutates(
    "fork",
    reads_only=("parent.block_table",),
    why="the parent keeps running on its table list; the child gets a list of its own",
)
#: 03.append_token (slot ``fork_cow``).
APPEND_TOKEN_MUTATES = Mutates(
    "append_token",
    in_place=("seq.block_table",),
    why="the engine keeps the sequence's table list and reads the new block from it",
)
#: 06.pick_victim (slot ``pick_victim``).
PICK_VICTIM_MUTATES = Mutates(
    "pick_victim", reads_only=("running",), why="it only chooses: the scheduler removes the victim itself"
)
#: 07.match_prefix (slot ``radix``).
MATCH_PREFIX_MUTATES = Mutates("match_prefix", reads_only=("key",), why="the cache keeps using the request's key")
#: 07.insert (slot ``radix``).
INSERT_MUTATES = Mutates(
    "insert", reads_only=("key", "value"), why="the cache keeps using the request's key and its slots"
)
#: 07.get_computed_blocks (slot ``prefix_lookup``, through its bridge).
GET_COMPUTED_BLOCKS_MUTATES = Mutates(
    "get_computed_blocks",
    reads_only=("request.block_hashes",),
    why="the request keeps its hash chain: the cache commits its blocks with it",
)
#: 04.schedule_step, 05.schedule_with_budget (slot ``schedule_step``): every request's ``num_computed_tokens``.
SCHEDULE_STEP_MUTATES = Mutates(
    "the step",
    reads_only=("num_computed_tokens",),
    why="the engine advances it after the step, once the tokens were computed",
)
#: 08.load_kv_tile (slot ``kv_tile_load``).
LOAD_KV_TILE_MUTATES = Mutates(
    "load_kv_tile", reads_only=("cache", "block_table"), why="a tile load only reads: the model attends over them"
)
