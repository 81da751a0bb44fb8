"""Differential checks: the learner's part and the kit's reference run on the same random cases.

A hand-picked test catches the mistakes its author thought of; a mistake that shows only on inputs
nobody picked passes it. So every exercise also has one *differential* test: a hypothesis strategy
draws cases from the states the engine really produces (boundaries included), and each case runs on
the learner's object and on the reference through the same driver. The judge then compares the two
transcripts as for any test - the whole observable state the driver records after each call::

    @differential(EX, st.lists(st.integers(0, 31), max_size=8), examples=60)
    def _(slot_mapping, case, rec):            # ONE case, on the learner's object or the reference
        table = ...built fresh from case...
        rec.step(f"slot_mapping({table}, ...)")
        rec.observe("slots", slot_mapping(table, ...))
        observe_unchanged(rec, before, block_table=table)

Determinism: the cases are drawn with a seed derived from the exercise id, hypothesis's example
database off and the generate phase only, so every run on every machine (same hypothesis version:
``requirements.lock`` pins it) draws the same cases in the same order, and a verdict never changes
between runs. The driver needs no hypothesis at run time beyond that first draw (the cases are plain
data, cached per process), so ``pagedlab grade`` runs the test like any other: in its trusted driver
process, the learner's object behind the pipe.

Shrinking: when the differential test fails in ``check()``, :func:`smallest_failure` searches again
with the same seed, this time comparing the learner with the reference case by case, and hypothesis
shrinks the first failing case to the smallest it can find within a budget of runs (a count, not a time,
so the case shown is the same on a loaded machine; a generous time cap only stops a pathological search); ``check()`` shows
that case (its inputs, the expected and the learner's state, the first field that differs, and the
hint of the mistake when one matches). The verdict itself never depends on the shrinking.
"""

from __future__ import annotations

import contextlib
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pagedlab.grading.judge import Outcome, judge
from pagedlab.grading.recorder import describe, to_plain
from pagedlab.grading.registry import Exercise, Test
from pagedlab.grading.runner import reference_transcript, run_driver

__all__ = [
    "SHRINK_RUNS",
    "SHRINK_CAP_S",
    "TITLE",
    "Differential",
    "Shrunk",
    "differential",
    "find",
    "run_alone",
    "shrunk_outcome",
    "smallest_failure",
]

#: The title of every exercise's differential test (wrong versions name it in ``caught by:``).
TITLE = "random cases against the reference, whole state compared"

#: Candidate cases ``check()`` may run while shrinking a failing one (the verdict is already known by then).
#: A count, not a time: the smallest case found, so the message shown, does not depend on the machine's load.
SHRINK_RUNS = 300
#: Seconds after which shrinking stops whatever the count (a learner's code that is slow on every case).
SHRINK_CAP_S = 15.0

_BY_EXERCISE: dict[str, Differential] = {}


def _describe_case(case: Any) -> str:
    return describe(to_plain(case))


@dataclass
class Differential:
    """One exercise's differential test (see the module docstring).

    Attributes:
        exercise: the exercise it belongs to.
        strategy: a hypothesis strategy drawing one case (plain data: numbers, strings, lists, tuples, dicts).
        run: ``run(obj, case, rec)`` builds the case's state fresh, runs ``obj`` on it and records the whole
            observable state (``rec.step`` / ``rec.observe`` / ``rec.state``).
        examples: how many cases the test draws.
        describe: ``describe(case) -> str``, the case as the learner reads it (default: its repr).
        timeout: seconds the whole test may take on the learner's object.
        draws: one line saying what the strategy draws (docs/differential_checks.md lists it).
    """

    exercise: Exercise
    strategy: Any
    run: Callable[[Any, Any, Any], None]
    examples: int = 60
    describe: Callable[[Any], str] = _describe_case
    timeout: float = 20.0
    draws: str = ""
    _cases: list[Any] | None = field(default=None, repr=False)

    @property
    def seed(self) -> int:
        """The seed of the draw: the same for an exercise on every run and machine."""
        return zlib.crc32(self.exercise.id.encode())

    def _settings(self, shrink: bool) -> Any:
        # lazy: start-up time (hypothesis, ~0.3 s)
        from hypothesis import HealthCheck, Phase, Verbosity, settings

        return settings(
            max_examples=self.examples,
            database=None,
            deadline=None,
            derandomize=False,
            phases=(Phase.generate, Phase.shrink) if shrink else (Phase.generate,),
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            report_multiple_bugs=False,
            print_blob=False,
        )

    def _search(self, prop: Callable[[Any], None], shrink: bool) -> None:
        """Run hypothesis over ``prop(case)`` with this exercise's seed and settings.

        The collecting draw (:meth:`cases`) and the comparing search (:func:`smallest_failure`) go through
        this one function, so both draw the same cases in the same order until the first failure.
        """
        # lazy: start-up time (hypothesis, ~0.3 s)
        from hypothesis import given, seed

        @seed(self.seed)
        @self._settings(shrink)
        @given(self.strategy)
        def search(case: Any) -> None:
            prop(case)

        with _no_local_constants():
            search()

    def cases(self) -> list[Any]:
        """The cases the test runs, drawn once per process (a list of plain data)."""
        if self._cases is None:
            drawn: list[Any] = []
            self._search(drawn.append, shrink=False)
            self._cases = [to_plain(c) for c in drawn]
        return self._cases

    def drive_cases(self, obj: Any, rec: Any, cases: list[Any], numbered: bool = True) -> None:
        """Run ``cases`` on ``obj`` in order; each begins with a step naming the case (the judge puts it
        in front of the message of a failure inside that case)."""
        for number, case in enumerate(cases, 1):
            label = f"case {number} of {len(cases)}: " if numbered else "the case: "
            rec.entries.append({"kind": "step", "label": label + self.describe(case), "case": True})
            self.run(obj, case, rec)

    def test_for(self, cases: list[Any]) -> Test:
        """A test running exactly ``cases``, unnumbered (what shrinking judges a candidate with)."""
        return Test(TITLE, lambda obj, rec: self.drive_cases(obj, rec, cases, numbered=False), timeout=self.timeout)


def differential(
    exercise: Exercise,
    strategy: Any,
    *,
    examples: int = 60,
    describe: Callable[[Any], str] | None = None,
    timeout: float = 20.0,
    draws: str = "",
) -> Callable[[Callable[[Any, Any, Any], None]], Differential]:
    """Decorator registering ``run(obj, case, rec)`` as ``exercise``'s differential test (module docstring).

    Returns the :class:`Differential` (not the function): the module keeps it only to find it again.
    """

    def deco(run: Callable[[Any, Any, Any], None]) -> Differential:
        if exercise.id in _BY_EXERCISE:
            raise ValueError(f"exercise {exercise.id} has a differential test already")
        diff = Differential(exercise, strategy, run, examples, describe or _describe_case, timeout, draws)
        exercise.test(TITLE, timeout=timeout)(lambda obj, rec: diff.drive_cases(obj, rec, diff.cases()))
        _BY_EXERCISE[exercise.id] = diff
        return diff

    return deco


def find(exercise_id: str) -> Differential | None:
    """The differential test of ``exercise_id`` (None when it has none)."""
    return _BY_EXERCISE.get(exercise_id)


def run_alone(exercise: Exercise, obj: Any) -> Outcome:
    """The verdict of ``exercise``'s differential test alone on ``obj``, in this process (the hand-written
    tests not run): what tells whether the design, not the examples, catches a mistake.

    Raises:
        LookupError: the exercise has no differential test.
    """
    diff = find(exercise.id)
    if diff is None:
        raise LookupError(f"exercise {exercise.id} has no differential test")
    test = next(t for t in exercise.public_tests() if t.title == TITLE)
    return judge(exercise, test, reference_transcript(exercise, test), run_driver(test, obj), pictures=False)


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis draws now and then a literal mined from the source of every *local* module imported so far
    (not site-packages: pagedlab itself, an editable install, the test files): the cases would then depend on
    which modules a process has imported (check() in a kernel, the grader, pytest) and on every literal
    edited anywhere in pagedlab. Inside this block it sees none (only its own fixed constants)."""
    # lazy: start-up time (hypothesis); internals of the pinned hypothesis (requirements.lock)
    from hypothesis.internal.conjecture import providers

    if not (hasattr(providers, "_get_local_constants") and hasattr(providers, "CONSTANTS_CACHE")):
        yield  # another hypothesis release: no local constants to hide (its draws differ anyway)
        return
    saved, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
    providers._get_local_constants = providers.Constants  # an empty set of constants
    providers.CONSTANTS_CACHE = type(cache)(1024)  # its permitted-constants cache, without the local ones
    try:
        yield
    finally:
        providers._get_local_constants, providers.CONSTANTS_CACHE = saved, cache


class _Differs(Exception):
    """Raised inside the search when the learner's run of a case differs from the reference's."""


@dataclass
class Shrunk:
    """The smallest failing case :func:`smallest_failure` found, and its verdict."""

    case: Any
    outcome: Outcome
    tried: int


def smallest_failure(
    exercise: Exercise, obj: Any, *, runs: int = SHRINK_RUNS, cap_s: float = SHRINK_CAP_S
) -> Shrunk | None:
    """Search the exercise's cases again comparing ``obj`` with the reference, and let hypothesis shrink the
    first failing case; the smallest found within ``runs`` candidate cases (or ``cap_s`` seconds, whichever
    comes first; None: no case failed in the search, or the exercise has no differential test).

    Only failures of the learner's code count (a case on which the reference itself fails is skipped), and
    every run is under the test's time limit, so a case that loops forever is a failing case like any other.
    """
    diff = find(exercise.id)
    if diff is None:
        return None
    reference = exercise.get_reference()
    found: list[Shrunk] = []
    deadline = time.monotonic() + cap_s
    tried = 0

    def prop(case: Any) -> None:
        nonlocal tried
        if tried >= runs or time.monotonic() > deadline:
            return  # out of budget: every later candidate "passes", so hypothesis keeps the smallest so far
        tried += 1
        plain = to_plain(case)
        test = diff.test_for([plain])
        ref = run_driver(test, reference, timeout=max(60.0, diff.timeout))
        got = run_driver(test, obj)
        out = judge(exercise, test, ref, got, pictures=False)
        if out.status in ("failed", "error", "timeout", "not_implemented"):
            found.append(Shrunk(plain, out, tried))
            raise _Differs

    try:
        diff._search(prop, shrink=True)
    except _Differs:
        pass
    except Exception:  # noqa: BLE001 - hypothesis's own errors (a flaky learner's object) never break check()
        pass
    if not found:
        return None
    # hypothesis replays the smallest case last; out of budget, that replay passed: take the shortest found
    return min(found, key=lambda s: (len(repr(s.case)), -s.tried))


def shrunk_outcome(exercise: Exercise, obj: Any, first: Outcome, *, pictures: bool = True) -> Outcome:
    """``first`` (a failed differential test) with its case replaced by the smallest failing case found.

    The status stays ``first``'s; the message leads with the smallest case, then the comparison of the
    learner's and the reference's state on it (the judge's message, hint included), with pictures.
    """
    diff = find(exercise.id)
    small = smallest_failure(exercise, obj) if diff is not None else None
    if diff is None or small is None:
        return first
    test = diff.test_for([small.case])
    ref = run_driver(test, exercise.get_reference(), timeout=max(60.0, diff.timeout))
    again = judge(exercise, test, ref, run_driver(test, obj), pictures=pictures)
    if again.passed:  # the learner's code is not deterministic: keep the verdict as it was found
        return first
    again.title, again.hidden, again.status = first.title, first.hidden, first.status
    again.message = f"the smallest failing case found (hypothesis shrank it from {diff.examples} random cases)\n" + (
        again.message
    )
    again.extra["case"] = small.case
    return again
