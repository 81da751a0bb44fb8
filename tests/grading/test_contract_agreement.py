"""One contract per part (issue 39, item 3): what ``check()`` accepts is what the engine accepts when the part is
plugged in. Each row is the exercise's solution with its result handed back in another container or number type
(the values are the same); the variant goes to ``check()`` and, through the bridge ``my_engine`` uses, into the
engine (``tests/grading/plugged.py``): both accept it or both refuse it, and a refusal names the contract
(``pagedlab.parts.contracts``) on both sides."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from pagedlab.grading import registry
from pagedlab.grading.checking import check
from tests.grading.plugged import plug


def _returning(transform: Callable[[Any], Any]) -> Callable[[str], Any]:
    """The solution of an exercise, its result passed through ``transform``."""

    def make(eid: str) -> Any:
        fn = registry.snippet_object(eid)

        @functools.wraps(fn)
        def variant(*args: Any) -> Any:
            return transform(fn(*args))

        return variant

    return make


def _child_table(transform: Callable[[list[int]], Any]) -> Callable[[str], Any]:
    """Lab 03's ``fork`` whose child holds ``transform(its block table)``."""

    def make(eid: str) -> Any:
        fn = registry.snippet_object(eid)

        @functools.wraps(fn)
        def variant(*args: Any) -> Any:
            child = fn(*args)
            child.block_table = transform(child.block_table)
            return child

        return variant

    return make


def _pair(
    first: Callable[[Any], Any] = lambda x: x, second: Callable[[Any], Any] = lambda x: x
) -> Callable[[Any], Any]:
    return lambda out: (first(out[0]), second(out[1]))


#: (exercise id, what the variant returns, the variant's maker, whether the contract accepts it)
VARIANTS: list[tuple[str, str, Callable[[str], Any], bool]] = [
    ("02.slot_mapping", "the solution", _returning(lambda s: s), True),
    ("02.slot_mapping", "numpy ints in a list", _returning(lambda s: [np.int64(x) for x in s]), True),
    ("02.slot_mapping", "a tuple", _returning(tuple), False),
    ("02.slot_mapping", "an int64 tensor", _returning(lambda s: torch.tensor(s, dtype=torch.int64)), False),
    ("02.slot_mapping", "a numpy array", _returning(np.array), False),
    ("02.slot_mapping", "a generator", _returning(lambda s: (x for x in s)), False),
    ("03.fork", "a child whose table is a tuple", _child_table(tuple), False),
    ("03.fork", "a child whose table holds numpy ints", _child_table(lambda t: [np.int64(b) for b in t]), False),
    ("03.append_token", "the copy as a list", _returning(lambda p: None if p is None else list(p)), True),
    ("03.append_token", "the copy as a tensor", _returning(lambda p: None if p is None else torch.tensor(p)), False),
    ("04.schedule_step", "an OrderedDict", _returning(OrderedDict), True),
    ("04.schedule_step", "numpy token counts", _returning(lambda d: {k: np.int64(v) for k, v in d.items()}), False),
    ("04.schedule_step", "a list of pairs", _returning(lambda d: list(d.items())), False),
    (
        "05.schedule_with_budget",
        "numpy token counts",
        _returning(lambda d: {k: np.int64(v) for k, v in d.items()}),
        False,
    ),
    ("06.schedule_with_preemption", "a list pair", _returning(list), False),
    ("06.schedule_with_preemption", "an OrderedDict of tokens", _returning(_pair(OrderedDict)), True),
    ("06.schedule_with_preemption", "the preempted ids as a tuple", _returning(_pair(second=tuple)), False),
    ("07.get_computed_blocks", "a list pair", _returning(list), False),
    ("07.get_computed_blocks", "a float token count", _returning(_pair(second=float)), False),
    ("07.get_computed_blocks", "the blocks as a tuple", _returning(_pair(tuple)), False),
    ("07.match_prefix", "a list pair", _returning(list), False),
    ("07.match_prefix", "the values as a tuple", _returning(_pair(tuple)), False),
    ("07.insert", "a numpy int", _returning(np.int64), True),
    ("07.insert", "a float", _returning(float), False),
    ("07.evict", "a tuple", _returning(tuple), False),
    ("07.evict", "numpy ints in a list", _returning(lambda s: [np.int64(x) for x in s]), True),
    ("08.load_kv_tile", "a list pair", _returning(list), False),
    ("08.load_kv_tile", "the mask as a list of bools", _returning(_pair(second=lambda m: m.tolist())), False),
]


@pytest.mark.parametrize(("eid", "what", "make", "accepted"), VARIANTS, ids=[f"{e}:{w}" for e, w, _, _ in VARIANTS])
def test_check_and_the_engine_agree(eid: str, what: str, make: Callable[[str], Any], accepted: bool) -> None:
    res = check(make(eid), eid, show=False)
    served = plug(eid, make(eid))
    engine_accepts = served.kind == "same"
    assert res.passed == engine_accepts, (
        f"{eid} returning {what}: check() {'passes' if res.passed else 'fails'} it, the engine "
        f"{'serves it' if engine_accepts else f'refuses it ({served.kind}: {served.text})'}\n{res.text()}"
    )
    assert res.passed == accepted, res.text()
    if not accepted:
        first = res.first_failure
        assert first is not None and "contract" in (first.message or ""), res.text()
        assert served.kind == "guard" and "contract" in served.text, served


def test_a_free_queue_listing_its_blocks_in_a_tuple_fails_check_as_its_guard_refuses_it() -> None:
    """``get_all_free_blocks`` is not called while serving, so its guard is called here directly."""
    from pagedlab.core.block_pool import KVCacheBlock
    from pagedlab.errors import ComponentError
    from pagedlab.parts.memory import free_queue_factory
    from pagedlab.parts.slots import Components

    Queue = registry.snippet_object("02.free_queue")

    class TupleQueue(Queue):  # type: ignore[misc, valid-type]
        def get_all_free_blocks(self) -> Any:
            return tuple(super().get_all_free_blocks())

    guard = Components.kit().guard("free_queue", lambda: 0)
    for cls, accepted in ((Queue, True), (TupleQueue, False)):
        queue = free_queue_factory(cls, guard)([KVCacheBlock(i) for i in range(4)])
        res = check(cls, "02.free_queue", show=False)
        if accepted:
            assert [b.block_id for b in queue.get_all_free_blocks()] == [0, 1, 2, 3]
            assert res.passed, res.text()
            continue
        with pytest.raises(ComponentError, match="the contract of get_all_free_blocks"):
            queue.get_all_free_blocks()
        first = res.first_failure
        assert first is not None and "the contract of get_all_free_blocks" in (first.message or ""), res.text()


# --- what a part may change of its inputs (issue 39, item 3: the mutation rules) -----------------------------
def _mutating(mutate: Callable[[tuple[Any, ...], Any], object]) -> Callable[[str], Any]:
    """The solution of an exercise, then ``mutate(its arguments, its result)``: the result is the solution's,
    the inputs are left changed (or rebound) as a part that breaks (or keeps) the mutation rules leaves them."""

    def make(eid: str) -> Any:
        fn = registry.snippet_object(eid)

        @functools.wraps(fn)
        def variant(*args: Any) -> Any:
            out = fn(*args)
            mutate(args, out)
            return out

        return variant

    return make


def _rebind_table(obj: Any) -> None:
    obj.block_table = list(obj.block_table)


def _queue_mutating(method: str) -> Callable[[str], Any]:
    """Lab 02's queue whose ``method`` (``__init__`` / ``prepend_n``) reverses the caller's list after its work."""

    def make(eid: str) -> Any:
        Queue = registry.snippet_object(eid)

        def mutating(self: Any, blocks: list[Any]) -> None:
            getattr(Queue, method)(self, blocks)
            blocks.reverse()

        return type(Queue.__name__, (Queue,), {method: mutating})

    return make


def _advance(running: Any, scheduled: Any) -> None:
    """Advance each scheduled request's ``num_computed_tokens`` (the engine's job, after the step)."""
    for r in running:
        r.num_computed_tokens += scheduled.get(r.request_id, 0)


#: (exercise id, what the variant does to its inputs, the variant's maker, the rule's part name, or None when the
#: mutation rules accept it)
MUTATIONS: list[tuple[str, str, Callable[[str], Any], str | None]] = [
    ("02.free_queue", "__init__ reverses the blocks given", _queue_mutating("__init__"), "FreeKVCacheBlockQueue"),
    ("02.free_queue", "prepend_n reverses the blocks given", _queue_mutating("prepend_n"), "FreeKVCacheBlockQueue"),
    ("02.slot_mapping", "reads its inputs only", _mutating(lambda a, out: None), None),
    ("02.slot_mapping", "reverses positions", _mutating(lambda a, out: a[1].reverse()), "slot_mapping"),
    ("02.slot_mapping", "appends to the block table", _mutating(lambda a, out: a[0].append(0)), "slot_mapping"),
    ("02.slot_mapping", "copies positions, then sorts the copy", _mutating(lambda a, out: sorted(a[1])), None),
    ("03.fork", "rebinds the parent's table to an equal list", _mutating(lambda a, out: _rebind_table(a[1])), "fork"),
    ("03.fork", "changes the parent's table", _mutating(lambda a, out: a[1].block_table.append(0)), "fork"),
    (
        "03.append_token",
        "rebinds the sequence's table to an equal list",
        _mutating(lambda a, out: _rebind_table(a[1])),
        "append_token",
    ),
    ("04.schedule_step", "advances num_computed_tokens", _mutating(lambda a, out: _advance(a[0], out)), "the step"),
    (
        "05.schedule_with_budget",
        "advances num_computed_tokens",
        _mutating(lambda a, out: _advance(a[0], out)),
        "the step",
    ),
    ("06.pick_victim", "removes the victim from running", _mutating(lambda a, out: a[0].remove(out)), "pick_victim"),
    ("06.pick_victim", "reverses running", _mutating(lambda a, out: a[0].reverse()), "pick_victim"),
    ("07.match_prefix", "consumes the key", _mutating(lambda a, out: a[1].clear()), "match_prefix"),
    ("07.insert", "consumes the key", _mutating(lambda a, out: a[1].clear()), "insert"),
    ("07.insert", "reverses the value", _mutating(lambda a, out: a[2].reverse()), "insert"),
    (
        "07.get_computed_blocks",
        "consumes the request's block hashes",
        _mutating(lambda a, out: a[0].block_hashes.clear()),
        "get_computed_blocks",
    ),
    ("08.load_kv_tile", "writes into the cache", _mutating(lambda a, out: a[0].add_(1)), "load_kv_tile"),
    ("08.load_kv_tile", "writes into the block table", _mutating(lambda a, out: a[1].add_(1)), "load_kv_tile"),
]


@pytest.mark.parametrize(("eid", "what", "make", "rule"), MUTATIONS, ids=[f"{e}:{w}" for e, w, _, _ in MUTATIONS])
def test_check_and_the_engine_agree_on_what_a_part_may_change(
    eid: str, what: str, make: Callable[[str], Any], rule: str | None
) -> None:
    """A part that changes an input it only reads, or rebinds state it must change in place, fails ``check()``
    exactly when the engine's guard refuses it, and both name the part's mutation rule
    (``pagedlab.parts.contracts.Mutates``, one declaration per part)."""
    res = check(make(eid), eid, show=False)
    served = plug(eid, make(eid))
    engine_accepts = served.kind == "same"
    assert res.passed == engine_accepts, (
        f"{eid} that {what}: check() {'passes' if res.passed else 'fails'} it, the engine "
        f"{'serves it' if engine_accepts else f'refuses it ({served.kind}: {served.text})'}\n{res.text()}"
    )
    assert res.passed == (rule is None), res.text()
    if rule is not None:
        named = f"the mutation rule of {rule}"
        first = res.first_failure
        assert first is not None and named in (first.message or ""), res.text()
        assert served.kind == "guard" and named in served.text, served
