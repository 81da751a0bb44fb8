"""``check(obj)``: run an exercise's tests on the learner's object, in the notebook.

::

    from pagedlab.grading import check
    check(FreeKVCacheBlockQueue)            # the exercise is found by the object's __name__
    check(my_queue_class, "02.free_queue")  # or named explicitly

Prints one line per test (✓ / ✗, see MARK) and, for the first failure, the step where the learner's
run diverged from the reference run (or the invariant that broke), what was expected and what
happened, a hint, and - in a notebook - pictures of the learner's and the expected state at
that step. When the first failure is the exercise's differential test (random cases against the
reference, :mod:`pagedlab.grading.differential`), the case shown is the smallest failing one
hypothesis finds by shrinking. Returns a :class:`CheckResult` (``.passed``) so tests and notebooks can assert on it.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pagedlab.grading import differential, registry
from pagedlab.grading.judge import Outcome, judge
from pagedlab.grading.runner import reference_transcript, run_driver
from pagedlab.i18n import check as i18n_check
from pagedlab.viz.pictures import side_by_side

__all__ = [
    "check",
    "CheckResult",
    "resolve_exercise",
    "skipped_after_timeout",
    "record_result",
    "passed_check",
    "changed_since_check",
]

#: Each test's mark: glyphs every DejaVu font has (no emoji: Debian's default fonts show those as empty
#: boxes), so plain text tells passed from failed; the notebook's report colors them too (:data:`COLOR`).
MARK = {
    "passed": "✓",
    "failed": "✗",
    "not_implemented": "○",
    "error": "✗",
    "timeout": "✗",
    "internal": "⚠",
    "unavailable": "–",
    "skipped": "↷",
}
#: The mark's color in the notebook's report: a second signal beside the glyph and the word.
COLOR = (
    {"passed": "#1a7f37", "internal": "#9a6700"}
    | {k: "#cf222e" for k in ("failed", "error", "timeout")}
    | {k: "#6e7781" for k in ("not_implemented", "unavailable", "skipped")}
)
WORD = {
    "passed": "passed",
    "failed": "failed",
    "not_implemented": "not implemented yet",
    "error": "raised an error",
    "timeout": "ran out of time",
    "internal": "test broken (not your fault)",
    "unavailable": "cannot be checked here",
    "skipped": "skipped",
}


@dataclass
class CheckResult:
    """What ``check()`` found.

    Attributes:
        exercise: exercise id ("" when the object could not be matched to an exercise).
        name: the learner-facing name.
        outcomes: one :class:`~pagedlab.grading.judge.Outcome` per test, in order.
        error: why no test ran (unknown name, ambiguous name ...), else "".
    """

    exercise: str
    name: str = ""
    summary: str = ""
    outcomes: list[Outcome] = field(default_factory=list)
    error: str = ""

    @property
    def passed(self) -> bool:
        """True when every test passed."""
        return not self.error and bool(self.outcomes) and all(o.passed for o in self.outcomes)

    @property
    def num_passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def first_failure(self) -> Outcome | None:
        return next((o for o in self.outcomes if not o.passed), None)

    def _first_skipped(self) -> Outcome | None:
        return next((o for o in self.outcomes if o.status == "skipped"), None)

    @property
    def details(self) -> list[dict[str, Any]]:
        """Plain dicts of the outcomes (pictures included)."""
        return [o.to_dict() for o in self.outcomes]

    @property
    def picture(self) -> str:
        """SVG of the learner's state at the first failure ("" if none)."""
        f = self.first_failure
        return f.picture if f else ""

    def __repr__(self) -> str:
        if self.error:
            return f"CheckResult({self.exercise or self.name!r}, error)"
        return f"CheckResult({self.exercise!r}, passed={self.passed}, {self.num_passed}/{len(self.outcomes)} tests)"

    # --- rendering ------------------------------------------------------------------------------
    def _rows(self, show_hidden_details: bool) -> Iterator[tuple[Outcome, tuple[str, str] | None]]:
        """The outcomes a report lists, each with the ``(message, broken invariant or "")`` shown under it.

        Only the first skipped outcome is listed (its message says why the rest did not run). Only the
        first failure has details (None for the others), and a hidden one only with ``show_hidden_details``.
        """
        first, first_skipped = self.first_failure, self._first_skipped()
        for o in self.outcomes:
            if o.status == "skipped":
                if o is first_skipped:
                    yield o, None
            elif o is first and o.message and (show_hidden_details or not o.hidden):
                yield o, (o.message, o.invariant if o.invariant and o.invariant not in o.message else "")
            else:
                yield o, None

    def text(self, show_hidden_details: bool = True) -> str:
        """The report as plain text (what ``check()`` prints outside a notebook)."""
        if self.error:
            return f"{MARK['failed']} {self.error}"
        lines = [f"Exercise {self.exercise}: {self.name} - {self.summary}"]
        for o, detail in self._rows(show_hidden_details):
            if o.status == "skipped":
                lines.append(f"  {MARK['skipped']} {o.message}")
                continue
            title = o.title + ("  [hidden test]" if o.hidden else "")
            lines.append(
                f"  {MARK.get(o.status, MARK['failed'])} {title}"
                + ("" if o.passed else f"  ({WORD.get(o.status, o.status)})")
            )
            if detail:
                message, invariant = detail
                lines.extend("       " + ln for ln in message.splitlines())
                if invariant:
                    lines.append(f"       broken invariant: {invariant}")
        n = len(self.outcomes)
        if self.passed:
            lines.append(f"All {n} tests passed.")
        else:
            lines.append(
                f"{self.num_passed} of {n} tests passed."
                + (" Fix the first failure first: later ones often follow from it." if self.first_failure else "")
            )
        return "\n".join(lines)

    def html(self, show_hidden_details: bool = True) -> str:
        """The report as HTML (what ``check()`` displays in a notebook), with the pictures."""
        e = html.escape
        if self.error:
            return (
                f'<div class="pl-check"><pre style="white-space:pre-wrap">{MARK["failed"]} {e(self.error)}</pre></div>'
            )
        parts = [
            f'<div class="pl-check" data-exercise="{e(self.exercise)}" data-passed="{int(self.passed)}">',
            f"<div><b>Exercise {e(self.exercise)}</b>: <code>{e(self.name)}</code> - {e(self.summary)}</div>",
            '<ul style="list-style:none;padding-left:0.5em;margin:0.3em 0">',
        ]
        for o, detail in self._rows(show_hidden_details):
            if o.status == "skipped":
                parts.append(f'<li data-status="skipped">{_mark_html("skipped")} {e(o.message)}</li>')
                continue
            title = e(o.title) + (" <i>[hidden test]</i>" if o.hidden else "")
            status = "" if o.passed else f" <span style='color:#888'>({e(WORD.get(o.status, o.status))})</span>"
            parts.append(f'<li data-status="{e(o.status)}">{_mark_html(o.status)} {title}{status}')
            if detail:
                message, invariant = detail
                text = message + (f"\nbroken invariant: {invariant}" if invariant else "")
                parts.append(f'<pre style="white-space:pre-wrap;margin:0.3em 0 0.3em 1.5em">{e(text)}</pre>')
                parts.append(side_by_side(o.picture, o.expected_picture))
            parts.append("</li>")
        parts.append("</ul>")
        n = len(self.outcomes)
        parts.append(
            f"<div>{f'All {n} tests passed.' if self.passed else f'{self.num_passed} of {n} tests passed.'}</div>"
        )
        parts.append("</div>")
        return "".join(parts)

    def _ipython_display_(self) -> None:  # pragma: no cover - only in notebooks
        # check() already displayed the report; a cell ending in check(...) must not show it twice.
        if not getattr(self, "_shown", False):
            _show(self, "html")


def _mark_html(status: str) -> str:
    """A test's mark for the HTML report: the glyph of :data:`MARK`, colored by :data:`COLOR`."""
    mark, color = MARK.get(status, MARK["failed"]), COLOR.get(status, COLOR["failed"])
    return f'<span class="pl-mark" style="color:{color};font-weight:bold">{mark}</span>'


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # lazy: optional dependency (IPython: only in a notebook)
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def resolve_exercise(obj: Any, exercise_id: str | None = None) -> registry.Exercise:
    """The exercise ``obj`` answers: ``exercise_id`` if given, else the one named ``obj.__name__``.

    Raises:
        registry.UnknownExerciseError: with a message written for the learner.
    """
    if exercise_id is not None:
        return registry.get(exercise_id)
    name = getattr(obj, "__name__", None)
    if not isinstance(name, str):
        cls = type(obj).__name__
        hits = registry.find_by_name(cls)
        if hits:
            raise registry.UnknownExerciseError(
                f"check() needs the class itself, not an object of it: write check({cls}), not check({cls}(...))"
            )
        raise registry.UnknownExerciseError(
            f"check() needs the function or class you wrote (got a {cls} object); e.g. check(slot_mapping)"
        )
    hits = registry.find_by_name(name)
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        ids = ", ".join(h.id for h in hits)
        raise registry.UnknownExerciseError(
            f"several exercises are called {name}: pass the id, e.g. check({name}, {hits[0].id!r}) (one of {ids})"
        )
    names = ", ".join(sorted({ex.name for ex in registry.all_exercises()}))
    raise registry.UnknownExerciseError(
        f"no exercise is called {name!r}. Did you rename it? Keep the name the lab gives, or pass the "
        f"exercise id: check({name}, '02.free_queue'). Exercises: {names}"
    )


def check(
    obj: Any,
    exercise_id: str | None = None,
    *,
    hidden_tests: str | None = None,
    show: Any = "auto",
    pictures: bool = True,
) -> CheckResult:
    """Run an exercise's tests on ``obj`` and report (see the module docstring).

    Args:
        obj: the learner's function or class.
        exercise_id: e.g. ``"02.free_queue"``; default: found from ``obj.__name__``.
        hidden_tests: an instructor's hidden-tests folder: also run its tests (instructors only; hidden tests
            loaded from another folder, by an earlier check() or grade() in this process, do not run).
        show: ``"auto"`` (HTML in a notebook, text elsewhere), ``"text"``, ``"html"``, or False.
        pictures: draw the failure pictures.

    Returns:
        A :class:`CheckResult`; ``result.passed`` is True when every test passed.
    """
    try:
        ex = resolve_exercise(obj, exercise_id)
    except registry.UnknownExerciseError as e:
        res = CheckResult("", getattr(obj, "__name__", type(obj).__name__), error=str(e))
        _show(res, show)
        return res
    chosen = set(registry.load_hidden_tests(hidden_tests)) if hidden_tests is not None else set()
    res = CheckResult(ex.id, ex.name, ex.summary)
    tests = [t for t in ex.tests if not t.hidden or (ex.id, t.title) in chosen]  # that folder's, no other's
    for number, test in enumerate(tests, 1):
        ref = reference_transcript(ex, test)
        got = run_driver(test, obj)
        outcome = judge(ex, test, ref, got, pictures=pictures and not res.first_failure)
        if res.first_failure is None and test.title == differential.TITLE and outcome.status in ("failed", "error"):
            outcome = differential.shrunk_outcome(ex, obj, outcome, pictures=pictures)
        res.outcomes.append(outcome)
        if res.outcomes[-1].status == "timeout":
            res.outcomes += skipped_after_timeout(ex.id, tests[number:], number, test.timeout)
            break
    if hidden_tests is None:
        record_result(ex.id, obj, res.passed)
    _show(res, show)
    return res


#: exercise id -> (the object last checked, its code when checked, whether it passed), for this kernel
#: (``my_engine`` reads it).
_RESULTS: dict[str, tuple[Any, tuple[Any, ...], bool]] = {}


def code_fingerprint(obj: Any) -> tuple[Any, ...]:
    """What ``obj`` runs: a function's code and defaults; for a class, that of every attribute its classes
    define (``object`` aside). Equal fingerprints mean the same code, so a method patched onto a class, or a
    ``__code__`` swapped into a function, after ``check()`` shows as a change."""
    if isinstance(obj, staticmethod | classmethod):
        return code_fingerprint(obj.__func__)
    if isinstance(obj, property):
        return tuple(code_fingerprint(f) for f in (obj.fget, obj.fset, obj.fdel))
    code = getattr(obj, "__code__", None)
    if code is not None:
        return (code, getattr(obj, "__defaults__", None), getattr(obj, "__kwdefaults__", None))
    if isinstance(obj, type):
        return tuple(
            (cls.__qualname__, name, code_fingerprint(value))
            for cls in obj.__mro__
            if cls is not object
            for name, value in vars(cls).items()
            if name not in ("__dict__", "__weakref__", "__doc__", "__module__")
        )
    return (id(obj),)


def record_result(exercise_id: str, obj: Any, passed: bool) -> None:
    """Remember that ``obj`` did (not) pass ``exercise_id``'s public tests in this process, and its code then."""
    _RESULTS[exercise_id] = (obj, code_fingerprint(obj), passed)


def passed_check(exercise_id: str, obj: Any) -> bool | None:
    """Whether ``obj`` itself (the same object, running the same code) passed ``check()`` last time it was
    checked here; None when this object was never checked (a re-run cell defines a new object) or its code
    changed since (:func:`changed_since_check`): check it again."""
    last = _RESULTS.get(exercise_id)
    if last is None or last[0] is not obj or changed_since_check(exercise_id, obj):
        return None
    return last[2]


def changed_since_check(exercise_id: str, obj: Any) -> bool:
    """True when ``obj`` is the object last checked for ``exercise_id`` but its code has changed since
    (a method reassigned on the class, a function's ``__code__`` replaced)."""
    last = _RESULTS.get(exercise_id)
    return last is not None and last[0] is obj and last[1] != code_fingerprint(obj)


def skipped_after_timeout(exercise_id: str, rest: list[registry.Test], number: int, timeout: float) -> list[Outcome]:
    """Outcomes (status ``skipped``) for the tests after test ``number`` (1-based) ran out of time.

    Code that loops forever on one test usually loops on the next ones too: running them would cost
    ``timeout`` seconds each. The report shows them as one line, the first outcome's message.
    """
    why = f"your code did not finish test {number} in {timeout:g} s; later tests skipped"
    return [Outcome(exercise_id, t.title, "skipped", hidden=t.hidden, message=why) for t in rest]


def _show(res: CheckResult, show: Any) -> None:
    if not show:
        return
    res._shown = True  # type: ignore[attr-defined]
    res = i18n_check.localized(res)  # the learner's language (pagedlab.i18n; a copy, English unchanged)
    mode = show
    if show == "auto":
        mode = "html" if _in_notebook() else "text"
    if mode == "html":
        try:
            from IPython.display import HTML, display  # lazy: optional dependency (IPython: only in a notebook)

            display(HTML(i18n_check.frame(res.html())))
            return
        except ImportError:  # pragma: no cover
            pass
    print(i18n_check.frame(res.text()))
