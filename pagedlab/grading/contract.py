"""The parts of an exercise's contract beyond its result: inputs it only reads, state it changes in
place, and the type of what it returns.

A test hands the learner's function the very objects it then reads back (never copies), so a function
that sorts the caller's list or consumes the caller's key is seen; these helpers record what the
reference run records too, so the judge reports the first difference with a hint naming the mistake::

    before = read_only(block_table=table, positions=positions)
    slots = fn(table, positions, block_size)
    rec.observe("slots", slots)
    observe_unchanged(rec, before, block_table=table, positions=positions)
    observe_shape(rec, "returned", slots, "a list of ints")
"""

from __future__ import annotations

from typing import Any

from pagedlab.grading.recorder import to_plain

__all__ = ["observe_same_object", "observe_shape", "observe_unchanged", "read_only", "shape"]


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


def shape(value: Any, depth: int = 2) -> str:
    """The container types of ``value``: ``"tuple(dict, list)"``, ``"list[int]"``, ``"Request"``.

    Only the outer ``depth`` levels are spelled out; a list's items are named by the types they hold.
    """
    t = type(value).__name__
    if depth <= 0:
        return t
    if isinstance(value, tuple):
        return f"tuple({', '.join(shape(v, depth - 1) for v in value)})"
    if isinstance(value, list):
        inner = sorted({shape(v, depth - 1) for v in value})
        return f"list[{' | '.join(inner)}]" if inner else "list"
    return t


def observe_shape(rec: Any, what: str, value: Any, expected: str, depth: int = 2) -> None:
    """Record the container types of ``value`` (see :func:`shape`); the hint names ``expected``."""

    def hint(want: Any, got: Any, state: Any) -> str:
        return f"{what} must be {expected} (the engine reads it as {want}); yours is {got}"

    rec.observe(f"type of {what}", shape(value, depth), hint=hint)
