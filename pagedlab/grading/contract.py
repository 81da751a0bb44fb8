"""The parts of an exercise's contract beyond its result: inputs it only reads, state it changes in
place, and the type of what it returns (the part's :class:`~pagedlab.parts.contracts.Returns`, the one
definition its guard in the engine enforces too).

A test hands the learner's function the very objects it then reads back (never copies), so a function
that sorts the caller's list or consumes the caller's key is seen; these helpers record what the
reference run records too, so the judge reports the first difference with a hint naming the mistake::

    before = read_only(block_table=table, positions=positions)
    slots = fn(table, positions, block_size)
    observe_contract(rec, contracts.SLOT_MAPPING, slots)   # the rule the engine's guard enforces
    rec.observe("slots", slots)
    observe_unchanged(rec, before, block_table=table, positions=positions)
"""

from __future__ import annotations

from typing import Any

from pagedlab.grading.recorder import to_plain
from pagedlab.parts.contracts import Returns

__all__ = ["observe_contract", "observe_same_object", "observe_unchanged", "read_only"]


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


def observe_same_object(rec: Any, what: str, before: Any, after: Any, why: str) -> None:
    """Record whether ``after`` is the very object ``before`` (state the contract changes in place)."""
    rec.observe(
        f"{what} is the same object after the call (changed in place)",
        after is before,
        hint=f"change {what} in place (append to it, assign an item); do not bind a new object: {why}",
    )


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
