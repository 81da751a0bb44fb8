"""Transcripts: what a test saw the learner's code do, as plain data.

A test *drives* an implementation (the learner's or the reference) and writes down what it
observes in a :class:`Recorder`::

    def drive(Queue, rec):
        q = Queue(make_blocks(4))
        rec.step("q = FreeKVCacheBlockQueue(blocks 0..3)")
        rec.state(queue_state(q))                       # for the picture and the invariants
        rec.step("q.popleft()")
        rec.observe("block returned", q.popleft().block_id)

The same driver runs on the reference, and :mod:`pagedlab.grading.judge` compares the two
transcripts entry by entry: the first difference is the first step where the learner's run
diverges from the reference run. Every value goes through :func:`to_plain` when it is recorded,
so a transcript holds only ``None``, ``bool``, ``int``, ``float``, ``str``, lists and dicts with
string keys - built fresh from exact built-in types. An object whose ``__eq__`` always returns
True is recorded as ``{"__unplain__": "ClassName"}`` and can never match a reference value.

Transcripts cross the process boundary in ``pagedlab grade`` as JSON: the learner's process
produces its transcript, the grader's own process produces the reference transcript and judges.
"""

from __future__ import annotations

import linecache
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from pagedlab.containment.rpc import safe_str

__all__ = ["MAX_ITEMS", "Fail", "Recorder", "error_entry", "safe_str", "time_limit_entry", "to_plain", "where_raised"]

#: Largest number of scalars one recorded value may hold (bigger ones are cut and marked).
MAX_ITEMS = 100_000
_MAX_DEPTH = 24


class Fail(AssertionError):
    """Raised by a test driver for a failure it detects itself (beyond comparing with the reference).

    Args:
        message: what was expected and what happened, in the learner's terms.
        invariant: the name of the broken invariant, if any.
    """

    def __init__(self, message: str, invariant: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.invariant = invariant


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_ITEMS


def _exact_number(x: Any) -> Any:
    """int/float subclasses and numpy/torch scalars -> exact int/float, else a sentinel."""
    if isinstance(x, bool):
        return bool.__bool__(x) if type(x) is not bool else x
    if isinstance(x, int):
        return int.__int__(x) if type(x) is not int else x
    if isinstance(x, float):
        return float.__float__(x) if type(x) is not float else x
    mod = type(x).__module__ or ""
    if mod.split(".")[0] in ("numpy", "torch"):
        # numpy/torch scalars and 0-d tensors: go through their Python value, then check it again.
        try:
            if hasattr(x, "ndim") and x.ndim not in (0, None):
                return _NOT_SCALAR
            val = x.item() if hasattr(x, "item") else x
        except Exception:  # noqa: BLE001 - a broken object is simply not a number
            return _NOT_SCALAR
        if type(val) in (bool, int, float):
            return val
    return _NOT_SCALAR


_NOT_SCALAR = object()


def to_plain(value: Any, _depth: int = 0, _budget: _Budget | None = None) -> Any:  # noqa: C901 - one branch per value type
    """A copy of ``value`` made only of exact built-in types (see the module docstring).

    * ``None``, ``bool``, ``int``, ``float``, ``str`` are copied (subclasses are converted through
      the base type's own method, so an overridden ``__eq__`` or ``__int__`` plays no part);
    * numpy / torch scalars become ``int``/``float``/``bool``; arrays and tensors become lists;
    * lists, tuples and ranges become lists; sets and frozensets become sorted lists;
    * dicts become dicts with ``str`` keys (int keys are written as their decimal string);
    * anything else becomes ``{"__unplain__": "<type name>"}``.
    NaN floats are kept (they never equal anything, including the reference).
    """
    budget = _budget or _Budget()
    budget.left -= 1
    if budget.left < 0:
        return {"__unplain__": "value too large"}
    if _depth > _MAX_DEPTH:
        return {"__unplain__": "value nested too deeply"}
    if value is None:
        return None
    t = type(value)
    if t in (bool, int, float):
        return value
    if isinstance(value, str):
        return str.__str__(value) if t is not str else value
    num = _exact_number(value)
    if num is not _NOT_SCALAR:
        return num
    if isinstance(value, (list, tuple, range)):
        items = list(value)
        if len(items) > budget.left:
            return {"__unplain__": "value too large"}
        return [to_plain(v, _depth + 1, budget) for v in items]
    if isinstance(value, (set, frozenset)):
        items = [to_plain(v, _depth + 1, budget) for v in value]
        try:
            return sorted(items, key=lambda v: (str(type(v)), v))
        except TypeError:
            return sorted(items, key=repr)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in dict.items(value):
            kp = to_plain(k, _depth + 1, budget)
            key = kp if type(kp) is str else str(kp) if type(kp) in (int, bool) or kp is None else repr(kp)
            out[key] = to_plain(v, _depth + 1, budget)
        return out
    mod = t.__module__ or ""
    if getattr(t, "_pl_is_proxy", False):  # an object living in the learner's process (containment.rpc)
        cls = str(object.__getattribute__(value, "_pl_cls"))
        if cls in ("builtins.list", "builtins.dict", "builtins.set"):  # exact built-in types only
            return to_plain(value._pl_req("plain"), _depth + 1, budget)
        return {"__unplain__": cls.rsplit(".", 1)[-1]}
    if mod.split(".")[0] in ("numpy", "torch") and hasattr(value, "tolist"):
        try:
            return to_plain(value.tolist(), _depth + 1, budget)
        except Exception:  # noqa: BLE001
            pass
    return {"__unplain__": t.__name__ if isinstance(t.__name__, str) else "object"}


def describe(value: Any) -> str:
    """A short human rendering of a plain value (``"block 3"``-style text is the caller's job)."""
    if isinstance(value, dict) and set(value) == {"__unplain__"}:
        return f"a {value['__unplain__']} object"
    if isinstance(value, float) and value == value and abs(value) >= 1e7:
        return f"{value:.6e}"
    text = repr(value)
    return text if len(text) <= 300 else text[:297] + "..."


class Recorder:
    """Collects one test run's transcript (see the module docstring).

    Entries (plain dicts, in order):

    * ``{"kind": "step", "label": str}`` - an operation begins;
    * ``{"kind": "obs", "what": str, "value": plain, "tol": float|None, "at_most": num|None}``
      plus, on the reference side only, ``hint`` (a string, or a callable
      ``hint(expected, got, state) -> str|None`` that the judge calls in the grader's process);
    * ``{"kind": "state", "value": plain}`` - a snapshot for pictures and invariants;
    * ``{"kind": "fail", "message": str, "invariant": str|None}`` - the driver saw a failure itself;
    * ``{"kind": "error", "type": str, "message": str, "where": str}`` - the code under test raised;
    * ``{"kind": "end"}`` - the driver ran to completion.
    """

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    # --- what drivers call -------------------------------------------------------------------
    def step(self, label: str) -> None:
        """Start a new step, described the way the learner would write the call."""
        self.entries.append({"kind": "step", "label": str(label)})

    def observe(
        self, what: str, value: Any, *, hint: Any = None, tol: float | None = None, at_most: float | None = None
    ) -> None:
        """Record one observed value.

        Args:
            what: what was looked at ("block returned by popleft()").
            value: the learner's (or the reference's) value; converted with :func:`to_plain`.
            hint: teaching text shown when this value differs from the reference's, or a callable
                ``hint(expected, got, state)`` returning such text (or None).
            tol: relative tolerance for numbers (then ints and floats compare by value).
            at_most: instead of comparing with the reference, require ``value <= at_most``.
        """
        entry: dict[str, Any] = {
            "kind": "obs",
            "what": str(what),
            "value": to_plain(value),
            "tol": tol,
            "at_most": at_most,
        }
        if hint is not None:
            entry["hint"] = hint
        self.entries.append(entry)

    def state(self, snapshot: Any) -> None:
        """Record a snapshot (plain data) of the structure after the current step."""
        self.entries.append({"kind": "state", "value": to_plain(snapshot)})

    def fail(self, message: str, invariant: str | None = None) -> None:
        """Stop the test with a failure the driver detected itself."""
        raise Fail(message, invariant)

    def expect_raises(
        self, what: str, fn: Callable[[], Any], types: Sequence[type[BaseException]] = (ValueError,), hint: Any = None
    ) -> None:
        """Call ``fn()`` and record whether it raised one of ``types`` (by category, not by class).

        The observation is ``"raises ValueError"`` when it raised an instance of ``types[0]``'s
        family, ``"raises <Other>"`` for another exception, and ``"returns normally"`` otherwise.
        """
        try:
            fn()
        except tuple(types) as e:  # noqa: F841
            outcome = f"raises {types[0].__name__}"
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001
            outcome = f"raises {type(e).__name__}"
        else:
            outcome = "returns normally"
        self.observe(what, outcome, hint=hint)

    # --- what the runner calls ---------------------------------------------------------------
    def record_exception(self, exc: BaseException) -> None:
        if isinstance(exc, Fail):
            self.entries.append({"kind": "fail", "message": exc.message, "invariant": exc.invariant})
            return
        self.entries.append(error_entry(type(exc).__name__, safe_str(exc)[:2000], where_raised(exc)))

    def finish(self) -> None:
        self.entries.append({"kind": "end"})

    def plain_entries(self) -> list[dict[str, Any]]:
        """The transcript without callables (what a learner process sends back)."""
        out = []
        for e in self.entries:
            e = dict(e)
            e.pop("hint", None)
            out.append(e)
        return out


def error_entry(type_name: str, message: str, where: str = "", **more: Any) -> dict[str, Any]:
    """An ``error`` entry (see :class:`Recorder`): what ends a transcript when the code under test raised,
    ran past its time limit (``where="<time limit>"``) or its process ended."""
    return {"kind": "error", "type": type_name, "message": message, "where": where, **more}


def time_limit_entry(limit: float | None) -> dict[str, Any]:
    """The ``error`` entry of a test stopped at its time limit (``limit`` seconds)."""
    return error_entry("TimeoutError", "time limit", "<time limit>", limit=limit)


def where_raised(exc: BaseException) -> str:
    """Where ``exc`` was raised in learner code: sent along by the learner's process
    (:mod:`pagedlab.containment.rpc`), or found in this process's traceback."""
    remote = getattr(exc, "remote_where", None)
    return remote[:300] if isinstance(remote, str) else learner_frame(exc)


def _is_library_file(filename: str) -> bool:
    if not filename or filename.startswith("<frozen"):
        return True
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fn = os.path.abspath(filename) if not filename.startswith("<") else filename
    if fn.startswith(pkg + os.sep):
        return True
    for root in {sys.prefix, sys.base_prefix, getattr(sys, "exec_prefix", sys.prefix)}:
        if fn.startswith(os.path.abspath(root) + os.sep):
            return True
    return False


def learner_frame(exc: BaseException) -> str:
    """``"line 12: q.append(b)"`` for the innermost traceback frame in the learner's code, or ``""``.

    Learner code is whatever is not inside the pagedlab package or the Python installation:
    notebook cells (IPython registers their source in ``linecache``) and the grader's
    ``<exercise ...>`` code objects.
    """
    where = ""
    try:
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            fn = frame.f_code.co_filename
            if _is_library_file(fn):
                continue
            line = linecache.getline(fn, lineno).strip()
            where = f"line {lineno}" + (f": {line}" if line else "")
    except Exception:  # noqa: BLE001
        return ""
    return where[:300]
