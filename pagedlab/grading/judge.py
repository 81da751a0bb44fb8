"""Compare a learner's transcript with the reference's and explain the first difference.

This runs where it can be trusted: in the notebook for ``check()`` (the learner's own kernel)
and in the grader's process for ``pagedlab grade`` (never in the process that ran learner
code). Both transcripts are plain data (:func:`pagedlab.grading.recorder.to_plain`); values are
compared with exact types - ``True`` is not ``1``, ``1.0`` is not ``1`` unless the observation
has a tolerance - so an object with a permissive ``__eq__`` cannot pass.

The verdict is an :class:`Outcome`: passed, or the first broken invariant / first diverging
observation / first exception, with the step it happened at, a teaching message, and pictures
of the learner's and the reference's state at that step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pagedlab.grading.recorder import describe

__all__ = ["Outcome", "first_difference", "format_path", "judge"]

Path_ = tuple[Any, ...]


@dataclass
class Outcome:
    """The verdict of one test.

    Attributes:
        exercise: exercise id.
        title: test title.
        status: ``passed`` | ``failed`` | ``not_implemented`` | ``error`` (the code raised) |
            ``timeout`` | ``internal`` (the test itself is broken: tell the instructor) | ``unavailable`` (this
            machine cannot run the test, e.g. Triton without a GPU or its interpreter: no verdict, no points).
        hidden: instructor-only test (details are never shown to learners).
        step: 1-based number of the step where it went wrong (0: before any step).
        step_label: that step, as the call the learner would write.
        message: the teaching explanation (several lines).
        invariant: name of the broken invariant, if that is what failed.
        picture: SVG of the learner's state at that step ("" if none).
        expected_picture: SVG of the reference's state at the same step ("" if none).
    """

    exercise: str
    title: str
    status: str
    hidden: bool = False
    step: int = 0
    step_label: str = ""
    message: str = ""
    invariant: str | None = None
    picture: str = ""
    expected_picture: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- comparing plain values -------------------------------------------------------------------------
def _kind(v: Any) -> str:
    """The plain-value kind of ``v`` the comparison dispatches on: a type name, ``"None"`` or ``"unplain"``."""
    if v is None:
        return "None"
    for plain in (bool, int, float, str, list):  # bool first: a bool is an int
        if isinstance(v, plain):
            return plain.__name__
    if isinstance(v, dict):
        return "unplain" if set(v) == {"__unplain__"} else "dict"
    return type(v).__name__


def _num_close(a: Any, b: Any, tol: float) -> bool:
    if _kind(a) not in ("int", "float") or _kind(b) not in ("int", "float"):
        return False
    if math.isnan(a) or math.isnan(b):
        return False
    return math.isclose(a, b, rel_tol=tol, abs_tol=0.0) or a == b


def first_difference(expected: Any, got: Any, tol: float | None = None, path: Path_ = ()) -> Path_ | None:  # noqa: C901 - one branch per transcript value kind
    """Path of the first place where ``got`` differs from ``expected`` (None when equal).

    The path is a tuple of dict keys / list indices; a path ending in ``"<length>"`` means the
    lists agree up to the shorter length, ``"<keys>"`` that the dict keys differ, and
    ``"<type>"`` that the kinds differ at that point.
    """
    ke, kg = _kind(expected), _kind(got)
    if tol is not None and ke in ("int", "float") and kg in ("int", "float"):
        return None if _num_close(expected, got, tol) else path
    if ke != kg:
        return path + ("<type>",)
    if ke == "list":
        for i, (e, g) in enumerate(zip(expected, got)):
            d = first_difference(e, g, tol, path + (i,))
            if d is not None:
                return d
        return None if len(expected) == len(got) else path + ("<length>",)
    if ke == "dict":
        if set(expected) != set(got):
            return path + ("<keys>",)
        for k in expected:
            d = first_difference(expected[k], got[k], tol, path + (k,))
            if d is not None:
                return d
        return None
    if ke == "float":
        if math.isnan(expected) and math.isnan(got):
            return None
        return None if expected == got else path
    if ke == "unplain":
        return path  # an object we could not convert never equals anything
    return None if expected == got else path


def _at(value: Any, path: Path_) -> Any:
    for p in path:
        if isinstance(p, str) and p.startswith("<"):
            break
        value = value[p]
    return value


def format_path(path: Path_) -> str:
    parts = []
    for p in path:
        if isinstance(p, str) and p.startswith("<"):
            continue
        parts.append(f"[{p}]" if isinstance(p, int) else f"[{p!r}]")
    return "".join(parts)


def _type_word(v: Any) -> str:
    k = _kind(v)
    return {
        "None": "None",
        "bool": "a bool",
        "int": "an int",
        "float": "a float",
        "str": "a str",
        "list": "a list",
        "dict": "a dict",
        "unplain": f"a {v.get('__unplain__') if isinstance(v, dict) else '?'} object",
    }.get(k, k)


def explain_difference(what: str, expected: Any, got: Any, path: Path_) -> list[str]:
    """Lines saying what differs, for an observation called ``what``."""
    lines = []
    last = path[-1] if path else None
    where = format_path(path)
    sub_e = _at(expected, path)
    sub_g = _at(got, path)
    if last == "<type>":
        lines.append(
            f"{what}{where}: expected {_type_word(sub_e)} ({describe(sub_e)}), "
            f"got {_type_word(sub_g)} ({describe(sub_g)})"
        )
        if _kind(sub_g) == "unplain":
            lines.append("(return plain Python values - int, str, list, tuple, dict - not custom objects)")
        return lines
    if last == "<length>":
        lines.append(f"{what}{where}: expected {len(sub_e)} items, got {len(sub_g)}")
        lines.append(f"  expected: {describe(sub_e)}")
        lines.append(f"  got:      {describe(sub_g)}")
        return lines
    if last == "<keys>":
        missing = sorted(set(sub_e) - set(sub_g), key=str)
        extra = sorted(set(sub_g) - set(sub_e), key=str)
        msg = f"{what}{where}: "
        if missing:
            msg += f"missing key(s) {', '.join(map(repr, missing))}"
        if extra:
            msg += ("; " if missing else "") + f"unexpected key(s) {', '.join(map(repr, extra))}"
        lines.append(msg)
        return lines
    if where:
        lines.append(f"{what}: first difference at {where}: expected {describe(sub_e)}, got {describe(sub_g)}")
        if len(repr(expected)) <= 160 and len(repr(got)) <= 160:
            lines.append(f"  expected: {describe(expected)}")
            lines.append(f"  got:      {describe(got)}")
    else:
        lines.append(f"{what}: expected {describe(expected)}, got {describe(got)}")
    return lines


# --- the judge ----------------------------------------------------------------------------------------
def _state_near(entries: Sequence[dict[str, Any]], i: int) -> Any | None:
    """The state recorded in the same step as entry ``i`` (after it if any, else the last before)."""
    for j in range(i, len(entries)):
        k = entries[j].get("kind")
        if k == "state":
            return entries[j].get("value")
        if k == "step" and j > i:
            break
    for j in range(min(i, len(entries)) - 1, -1, -1):
        if entries[j].get("kind") == "state":
            return entries[j].get("value")
    return None


def _valid_entries(got: Any) -> list[dict[str, Any]]:
    if not isinstance(got, list):
        return []
    return [e for e in got if isinstance(e, dict) and isinstance(e.get("kind"), str)]


#: What the reference's run raises when this machine cannot run the test at all (Triton's kernels, no GPU and no
#: interpreter): the verdict is "unavailable", never a pass, a fail or an "internal" that gives the points away.
UNAVAILABLE_ERROR = "KernelUnavailableError"


def _internal(out: Outcome, ref: Sequence[dict[str, Any]]) -> bool:
    """Mark ``out`` internal, or unavailable (the reference could not run here), and return True when the
    reference's own run failed or did not end."""
    if ref and ref[-1].get("kind") == "end" and not any(e.get("kind") in ("error", "fail") for e in ref):
        return False
    bad = next((e for e in ref if e.get("kind") in ("error", "fail")), {})
    if bad.get("kind") == "error" and bad.get("type") == UNAVAILABLE_ERROR:
        out.status = "unavailable"
        out.message = f"cannot be checked here: {bad.get('message', '')}"
        return True
    out.status = "internal"
    out.message = (
        "this test failed on the reference implementation itself, so it says nothing about "
        f"your code; please tell the instructor ({bad.get('type', '')}: "
        f"{bad.get('message', 'no end')})"
    )
    return True


def _error(out: Outcome, g: dict[str, Any], test: Any) -> None:
    """Fill ``out`` from an ``error`` entry of the learner's transcript."""
    step_no, label = out.step, out.step_label
    etype = str(g.get("type", "Exception"))
    where = str(g.get("where", ""))
    if etype == "NotImplementedError":
        out.status = "not_implemented"
        out.message = "not implemented yet: replace the line `raise NotImplementedError(...)` with your code"
    elif etype == "TimeoutError" and where == "<skipped>":
        out.status = "timeout"
        out.message = "not run: an earlier test of this exercise ran out of time"
    elif etype == "TimeoutError" and where == "<time limit>":
        out.status = "timeout"
        limit = g.get("limit") if type(g.get("limit")) in (int, float) else test.timeout
        out.message = (
            f"step {step_no} (`{label}`) took longer than {limit:g} s: an infinite loop? "
            "(a loop whose condition never changes, or a linked list walked in a circle)"
        )
    else:
        out.status = "error"
        msg = str(g.get("message", ""))
        out.message = (
            f"step {step_no} (`{label}`): your code raised {etype}"
            + (f": {msg}" if msg else "")
            + (f"\n  at {where}" if where else "")
        )


def _differs(out: Outcome, r: dict[str, Any], g: dict[str, Any]) -> bool:
    """Fill ``out`` and return True when the learner's entry ``g`` is not the reference's kind of entry."""
    rk, gk = r["kind"], g.get("kind")
    if gk == "fail":
        out.status = "failed"
        out.invariant = g.get("invariant") if isinstance(g.get("invariant"), str) else None
        msg = str(g.get("message", ""))
        out.message = f"step {out.step} (`{out.step_label}`): {msg}" if out.step else msg
        return True
    if gk != rk or (rk == "step" and g.get("label") != r["label"]) or (rk == "obs" and g.get("what") != r["what"]):
        out.status = "failed"
        out.message = (
            f"step {out.step} (`{out.step_label}`): your run took a different path from the reference's "
            f"here (expected {r.get('label') or r.get('what') or rk}, "
            f"got {g.get('label') or g.get('what') or gk})"
        )
        return True
    return False


def _broken_invariant(out: Outcome, exercise: Any, g: dict[str, Any]) -> bool:
    """Fill ``out`` and return True when the learner's recorded state breaks an invariant."""
    broken = _check_invariants(exercise, g.get("value"))
    if broken is None:
        return False
    name, msg = broken
    out.status, out.invariant = "failed", name
    out.message = (
        f"after step {out.step} (`{out.step_label}`) an invariant is broken - {name}:\n  {msg}"
        if out.step
        else f"an invariant is broken - {name}:\n  {msg}"
    )
    return True


def _wrong_value(out: Outcome, ref: Sequence[dict[str, Any]], i: int, g: dict[str, Any], ref_state: Any) -> bool:
    """Fill ``out`` and return True when observation ``i`` of the learner differs from the reference's."""
    r = ref[i]
    exp, val = r.get("value"), g.get("value")
    prefix = f"step {out.step} (`{out.step_label}`):"
    if r.get("at_most") is not None:
        bound = r["at_most"]
        if _kind(val) in ("int", "float") and val <= bound:
            return False
        out.status = "failed"
        out.message = f"{prefix} {r['what']}: expected at most {bound:g}, got {describe(val)}" + _hint_text(
            r, exp, val, ref_state
        )
        return True
    path = first_difference(exp, val, r.get("tol"))
    if path is None:
        return False
    out.status = "failed"
    lines = [prefix] if out.step else []
    lines += explain_difference(r["what"], exp, val, path)
    out.message = "\n".join(lines) + _hint_text(r, exp, val, _state_near(ref, i) or ref_state)
    out.extra["path"] = list(path)
    return True


def _compare(out: Outcome, exercise: Any, test: Any, ref: Sequence[dict[str, Any]], got: list[dict[str, Any]]) -> int:  # noqa: C901 - one branch per transcript entry kind (step, error, state, obs, end)
    """Walk both transcripts, filling ``out`` at the first difference; return the index where it stopped."""
    ref_state: Any = None
    for i, r in enumerate(ref):
        g = got[i] if i < len(got) else None
        if r["kind"] == "step":
            out.step, out.step_label = out.step + 1, r["label"]
            if r.get("case") is True:  # a differential test's case begins (pagedlab.grading.differential)
                out.extra["case_label"] = r["label"]
        if g is None:
            out.status = "timeout" if out.step else "error"
            out.message = (
                f"your code did not get through step {out.step} (`{out.step_label}`): it ran out of "
                "time or stopped the process"
                if out.step
                else "your code did not run (it stopped the process?)"
            )
            return i
        if g.get("kind") == "error":
            _error(out, g, test)
            return i
        if _differs(out, r, g):
            return i
        if r["kind"] == "state":
            ref_state = r.get("value")
            if _broken_invariant(out, exercise, g):
                return i
        elif r["kind"] == "obs" and _wrong_value(out, ref, i, g, ref_state):
            return i
        elif r["kind"] == "end":
            out.status, out.message, out.step, out.step_label = "passed", "", 0, ""
            return i
    return len(ref)


def judge(exercise: Any, test: Any, ref: Sequence[dict[str, Any]], got: Any, pictures: bool = True) -> Outcome:
    """Judge one test: compare the learner's transcript ``got`` with the reference's ``ref``.

    Args:
        exercise: the :class:`~pagedlab.grading.registry.Exercise` (invariants, renderer).
        test: the :class:`~pagedlab.grading.registry.Test`.
        ref: the reference transcript (entries may carry callable hints).
        got: the learner's transcript (untrusted plain data; malformed entries are ignored).
        pictures: render the state pictures of a failure.

    Returns:
        The :class:`Outcome`: passed, or the first difference (``internal`` when the test fails
        on the reference itself).
    """
    out = Outcome(exercise.id, test.title, "passed", hidden=test.hidden)
    if _internal(out, ref):
        return out
    entries = _valid_entries(got)
    i = _compare(out, exercise, test, ref, entries)
    case = out.extra.pop("case_label", None)
    if out.status != "passed" and isinstance(case, str) and out.step_label != case:
        out.message = f"in {case}\n{out.message}"
    if out.status in ("failed", "error") and pictures and exercise.render is not None:
        idx = min(i, len(entries))
        gs = _state_near(entries, idx) if entries else None
        rs = _state_near(ref, idx)
        path = tuple(out.extra.get("path", ())) or None
        out.picture = _safe_render(exercise, gs, rs, path)
        out.expected_picture = _safe_render(exercise, rs, None, path) if rs is not None else ""
    return out


def _hint_text(r: dict[str, Any], expected: Any, got: Any, state: Any) -> str:
    hint = r.get("hint")
    if callable(hint):
        try:
            hint = hint(expected, got, state)
        except Exception:  # noqa: BLE001 - a hint must never break the verdict
            hint = None
    return f"\n  hint: {hint}" if isinstance(hint, str) and hint else ""


def _check_invariants(exercise: Any, state: Any) -> tuple[str, str] | None:
    if state is None:
        return None
    for name, fn in exercise.invariants:
        try:
            msg = fn(state)
        except Exception as e:  # noqa: BLE001 - malformed learner state
            msg = f"the state could not be read ({type(e).__name__}: {e})"
        if msg:
            return name, str(msg)
    return None


def _safe_render(exercise: Any, state: Any, expected: Any, path: Any) -> str:
    if state is None:
        return ""
    try:
        return exercise.render(state, expected, path) or ""
    except Exception:  # noqa: BLE001 - a picture must never break the verdict
        return ""
