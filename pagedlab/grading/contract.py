"""The parts of an exercise's contract beyond its result: inputs it only reads, state it changes in
place (the part's :class:`~pagedlab.parts.contracts.Mutates`), and the type of what it returns (the part's :class:`~pagedlab.parts.contracts.Returns`, the one
definition its guard in the engine enforces too).

A test hands the learner's function the very objects it then reads back (never copies), so a function
that sorts the caller's list or consumes the caller's key is seen; these helpers record what the
reference run records too, so the judge reports the first difference with a hint naming the mistake::

    before = snapshot(contracts.SLOT_MAPPING_MUTATES, block_table=table, positions=positions)
    slots = fn(table, positions, block_size)
    observe_contract(rec, contracts.SLOT_MAPPING, slots)   # the rule the engine's guard enforces
    rec.observe("slots", slots)
    observe_read_only(rec, contracts.SLOT_MAPPING_MUTATES, before, block_table=table, positions=positions)
"""

from __future__ import annotations

from typing import Any

import torch

from pagedlab.grading.recorder import to_plain
from pagedlab.parts.contracts import Mutates, Returns

__all__ = [
    "observe_contract",
    "observe_in_place",
    "observe_read_only",
    "observe_unchanged",
    "read_only",
    "snapshot",
]


def read_only(**inputs: Any) -> dict[str, Any]:
    """Plain snapshots (:func:`~pagedlab.grading.recorder.to_plain`) of ``inputs``, taken before the call."""
    return {name: to_plain(value) for name, value in inputs.items()}


def observe_unchanged(rec: Any, before: dict[str, Any], **after: Any) -> None:
    """Record, for each input of ``before``, whether the call left it as it was.

    The observation is ``True`` when the input's plain value after the call equals its snapshot; when
    it does not, the learner's run records the value it left instead, and the hint says which input
    was changed and what it held before.
    """
    for name, value in after.items():
        now = to_plain(value)
        was = before[name]
        rec.observe(
            f"`{name}` after the call (the function only reads it)",
            True if now == was else now,
            hint=_changed_hint(name, was),
        )


def _changed_hint(name: str, was: Any) -> Any:
    def hint(expected: Any, got: Any, state: Any) -> str:
        shown = repr(was)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        return (
            f"your function changed `{name}`, which it only reads (the caller still uses it): it was {shown}. "
            "Work on a copy, or read it without changing it (no sort/pop/del/remove/assignment on it)"
        )

    return hint


def observe_contract(rec: Any, contract: Returns, value: Any, **context: Any) -> None:
    """Record whether ``value`` keeps ``contract`` (:class:`~pagedlab.parts.contracts.Returns`, the definition
    the part's guard enforces in the engine): ``"ok"`` on the reference run, the contract's own message on a
    result the engine would refuse (a tuple or a tensor where it reads a list), whatever its values."""

    def hint(expected: Any, got: Any, state: Any) -> str:
        return (
            f"return what the contract of {contract.part} says ({contract.expected}): the engine refuses "
            "anything else when your part is plugged in (the same contract, pagedlab.parts.contracts)"
        )

    rec.observe(f"{contract.what} (the contract of {contract.part})", contract.verdict(value, **context), hint=hint)


def snapshot(rule: Mutates, **inputs: Any) -> dict[str, tuple[Any, Any]]:
    """Each read-only input of ``rule`` (by its declared name: ``**{"parent.block_table": t}`` for a dotted one),
    taken before the call: the object and a copy of its value (:func:`_copy`)."""
    for name in inputs:
        rule.changed(name)  # a name the rule does not declare is the test's mistake: KeyError
    return {name: (value, _copy(value)) for name, value in inputs.items()}


def _copy(value: Any) -> Any:
    """What :func:`observe_read_only` compares: a tensor's clone (a large cache is no plain value), else the plain
    value."""
    return value.detach().clone() if isinstance(value, torch.Tensor) else to_plain(value)


def _changed(was: Any, value: Any) -> Any:
    """None when ``value`` still holds ``was`` (:func:`_copy`'s), else what to record instead (NaN equals NaN)."""
    if isinstance(was, torch.Tensor):
        if not isinstance(value, torch.Tensor) or value.shape != was.shape or value.dtype != was.dtype:
            return f"a {type(value).__name__} of another shape or dtype"
        same = (
            bool(((value == was) | (value.isnan() & was.isnan())).all())
            if value.is_floating_point()
            else (torch.equal(value, was))
        )
        return None if same else f"a tensor with {int((value != was).sum())} values changed"
    now = to_plain(value)
    return None if now == was else ("None" if now is None else now)


def observe_read_only(rec: Any, rule: Mutates, before: dict[str, tuple[Any, Any]], **after: Any) -> None:
    """Record, for each read-only input of ``rule`` in ``before`` (:func:`snapshot`), whether the call left it as
    it was: the same values, and for an attribute (a dotted name: ``parent.block_table``) the same object. The
    observation's name and hint are the rule's (:meth:`~pagedlab.parts.contracts.Mutates.changed`), the words the
    part's guard raises in the engine."""
    for name, value in after.items():
        given, was = before[name]
        now = _changed(was, value)
        if now is None and "." in name and value is not given:
            now = "a new object with the same values"
        shown = repr(was if not isinstance(was, torch.Tensor) else f"a tensor of shape {tuple(was.shape)}")
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        message = f"{rule.changed(name)}. It was {shown}"
        rec.observe(
            f"`{name}` after the call ({rule.rule})",
            True if now is None else now,
            hint=message,
        )


def observe_in_place(rec: Any, rule: Mutates, name: str, given: Any, after: Any) -> None:
    """Record whether ``after`` is the very object ``given`` (``name``, which ``rule`` changes in place), in the
    rule's words (:meth:`~pagedlab.parts.contracts.Mutates.rebound`), as the part's guard raises them."""
    rec.observe(f"`{name}` is the same object after the call ({rule.rule})", after is given, hint=rule.rebound(name))
