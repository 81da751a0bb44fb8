"""``pagedlab grade``: grade a folder of submitted notebooks, safely.

::

    pagedlab grade submissions/ [more paths...] [--hidden-tests DIR] [--out DIR]
                   [--timeout S] [--memory MB] [--jobs N] [--exercises ID ...] [--points ID=P|FILE.toml]
                   [--scoring all-or-nothing|partial]

SUBMISSIONS are notebook files (one learner each, named by the file name) and/or folders. A
folder holds one entry per learner: a notebook (learner = file name without ``.ipynb``) or a
subfolder (learner = folder name; all its notebooks, at any depth, are that learner's work).
Other files are reported and skipped.

Three processes per learner (the design and its limits are in ``docs/instructor_guide.md``):
this one never runs learner code - it finds the submissions (:mod:`pagedlab.grading.submissions`), starts
and supervises the drivers (:mod:`pagedlab.grading.supervisor`), computes the reference transcripts and
judges (this module), and writes the reports (:mod:`pagedlab.grading.report`); a *driver*
process (:mod:`pagedlab.grading.driver`, trusted) runs every test driver on proxies of the
learner's objects; the *learner's process* (:mod:`pagedlab.grading.sandbox`) holds only the
learner's definitions and answers the driver's calls over a pipe (:mod:`pagedlab.containment.rpc`).
Each starts fresh in a fresh temporary folder, with memory/CPU/file-size limits and a wall-clock
timeout that kills the whole process group; the learner's process is also contained by the kernel
(:mod:`pagedlab.containment.kernel`). This process is the subreaper of its run
(:mod:`pagedlab.containment.reaper`): every process left behind is killed before a result is read or a
report written, and SIGINT/SIGTERM stop every process and remove every temporary folder. A
submission that loops, crashes, exits, hogs memory, touches other files or patches the kit only
loses its own points. Reports are written atomically, learner text escaped (:mod:`pagedlab.grading.text`).

Writes to ``--out`` (default ``grading-output/``):

* ``grades.csv`` - one row per learner: score, max, per-exercise scores, status, flags;
* ``feedback/<learner>.html`` - per test ✅/❌, the first failure of each exercise with its step,
  message and pictures; hidden tests show pass/fail only;
* ``all_learners.json`` - every learner's results in one file (NOT Gradescope's format: a dict of
  learner -> results), plus ``gradescope/<learner>/results.json`` (exactly Gradescope's format);
* ``logs/<learner>.txt`` - for the instructor: the learner process's output and exit status.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagedlab.containment import reaper
from pagedlab.errors import PagedLabError
from pagedlab.grading import e2e, registry
from pagedlab.grading.e2e import (
    E2EPlan,
    E2EResult,
    judge_e2e,
)
from pagedlab.grading.extract import cell_source
from pagedlab.grading.hidden import hidden_failure
from pagedlab.grading.judge import Outcome, judge
from pagedlab.grading.points import (
    DEFAULT_SCORING,
    PointsError,
    add_points_argument,
    add_scoring_argument,
    exercise_score,
    parse_points,
    parse_scoring,
    points_of,
)
from pagedlab.grading.provenance import FLAG_PREFIX as REFERENCE_FLAG
from pagedlab.grading.runner import reference_transcript
from pagedlab.grading.submissions import GradeError, Learner, apply_roster, discover, name_clashes, read_roster
from pagedlab.grading.supervisor import MAX_RESULT_BYTES, TIME_SCALE_ENV, exit_reason, run_learners, time_scale
from pagedlab.grading.text import printable
from pagedlab.grading.triton_mode import use_interpreter_without_gpu

__all__ = [
    "TIME_SCALE_ENV",
    "GradeError",
    "Learner",
    "LearnerResult",
    "add_arguments",
    "add_limit_arguments",
    "discover",
    "grade",
    "main",
    "time_scale",
]


@dataclass
class ExerciseResult:
    """One learner's result on one exercise (a row of the feedback page and a column of ``grades.csv``)."""

    #: The exercise id, e.g. ``"02.slot_mapping"``.
    exercise: str
    #: The learner's object was found and built (its cell ran); only then are its tests judged.
    found: bool = False
    #: The notebook it came from, under the learner's own file name.
    notebook: str = ""
    #: Why it was not found or did not build (empty when ``found``).
    error: str = ""
    #: Remarks from finding its cell (two cells marked with its id, a cell without its marker line).
    notes: list[str] = field(default_factory=list)
    #: For the instructor: what the cell does that a solution should not (imports the kit's reference,
    #: patches kit objects; see ``driver.static_flags``).
    flags: list[str] = field(default_factory=list)
    #: The flag saying the object is the kit's own implementation (:mod:`pagedlab.grading.provenance`), or "".
    reference: str = ""
    #: Why the points its tests earned are not given ("" when they are): a reference hand-in, unless
    #: ``--reference-earns-points``.
    withheld: str = ""
    #: One judged outcome per test of the exercise, hidden tests included.
    outcomes: list[Outcome] = field(default_factory=list)
    #: For the instructor only (grades.csv, the logs, Gradescope's instructor-only test; never a learner's file):
    #: why each hidden test that did not pass failed - the exception or the limit hit, and the seconds it ran.
    hidden_why: list[str] = field(default_factory=list)
    score: float = 0.0
    #: The exercise's points (``registry``, ``--points``); ``score``: what its tests earned (``--scoring``).
    max_score: float = 0.0


@dataclass
class LearnerResult:
    learner: Learner
    status: str = "ok"  # ok | error | timeout | crashed | invalid
    messages: list[str] = field(default_factory=list)
    exercises: dict[str, ExerciseResult] = field(default_factory=dict)
    log: str = ""
    seconds: float = 0.0
    e2e: E2EResult | None = None  # the end-to-end test (its points count only when the instructor gave some)

    @property
    def score(self) -> float:
        extra = self.e2e.score if self.e2e is not None else 0.0
        return round(sum(e.score for e in self.exercises.values()) + extra, 4)

    @property
    def max_score(self) -> float:
        extra = self.e2e.points if self.e2e is not None else 0.0
        return round(sum(e.max_score for e in self.exercises.values()) + extra, 4)


# --- judging ----------------------------------------------------------------------------------------------
def _notebook_messages(ln: dict[str, Any], learner: Learner) -> list[str]:
    """Messages of one ``notebook`` line: unreadable, not of this course, notes."""
    nb = _orig_name(str(ln.get("notebook", "")), learner)
    out = []
    if isinstance(ln.get("error"), str):
        out.append(f"{nb}: {ln['error']}")
    elif isinstance(ln.get("found"), dict) and not ln["found"]:
        lab = _lab_without_exercises(_orig_path(str(ln.get("notebook", "")), learner))
        out.append(
            f"{nb}: lab {lab} of this course has no graded exercises; nothing in it to grade"
            if lab
            else f"{nb}: no exercise cell of this course found (no '# EXERCISE <id>' line and no "
            "definition of an exercise's name). Is it from this course?"
        )
    notes = ln.get("notes")
    out += [f"{nb}: {note}" for note in (notes if isinstance(notes, list) else [])]
    return out


def _take_exercise(er: ExerciseResult, ln: dict[str, Any], learner: Learner) -> None:
    """Fill ``er`` from an ``exercise`` line (the first one that found the exercise wins)."""
    if er.found:
        return
    er.notebook = _orig_name(str(ln.get("notebook", "")), learner)
    er.found = bool(ln.get("ok"))
    er.error = str(ln.get("error", ""))[:2000]
    er.notes = [str(x)[:500] for x in ln.get("notes", [])][:20] if isinstance(ln.get("notes"), list) else []
    er.flags = [str(x)[:300] for x in ln.get("flags", [])][:5] if isinstance(ln.get("flags"), list) else []
    er.reference = next((f for f in er.flags if f.startswith(REFERENCE_FLAG)), "")


def _read_lines(
    res: LearnerResult, lines: list[dict[str, Any]], exercise_ids: list[str]
) -> tuple[dict[tuple[Any, ...], Any], list[str]]:
    """Messages and exercises of ``res`` from the driver's lines; return (transcripts, audit flags)."""
    learner = res.learner
    transcripts: dict[tuple[Any, ...], Any] = {}
    audit: list[str] = []
    for ln in lines:
        t = ln.get("type")
        if t == "notebook":
            res.messages += _notebook_messages(ln, learner)
        elif t == "exercise" and ln.get("exercise") in exercise_ids:
            _take_exercise(res.exercises.setdefault(ln["exercise"], ExerciseResult(ln["exercise"])), ln, learner)
        elif t == "transcript":
            key = (str(ln.get("exercise")), str(ln.get("test")), bool(ln.get("hidden")))
            transcripts.setdefault(key, ln.get("entries"))
            if isinstance(ln.get("seconds"), (int, float)):
                transcripts.setdefault(("seconds", *key), float(ln["seconds"]))
        elif t == "audit" and isinstance(ln.get("changed"), list):
            local = [ex.id for ex in registry.all_exercises() if ex.runs_in_learner_process]
            audit.append(
                "replaced the kit's objects in its own process ("
                + ", ".join(map(str, ln["changed"][:3]))
                + "): it earns nothing, the tests run in another process"
                + (f" (except those of {', '.join(local)}: instructor guide, section 7)" if local else "")
            )
        elif t == "reference" and ln.get("exercise") in res.exercises and isinstance(ln.get("flag"), str):
            er = res.exercises[ln["exercise"]]  # provenance.RunWatch: the reference's code ran during its tests
            flag = ln["flag"][:300]
            if flag.startswith(REFERENCE_FLAG) and flag not in er.flags:
                er.flags.insert(0, flag)
                er.reference = er.reference or flag
        elif t == "note" and isinstance(ln.get("message"), str):
            res.messages.append(
                re.sub(r"nb\d+_[A-Za-z0-9._-]*?\.ipynb", lambda m: _orig_name(m.group(0), learner), ln["message"][:300])
            )
    return transcripts, audit


def _score_exercise(
    er: ExerciseResult, transcripts: dict[tuple[Any, ...], Any], done: bool, scoring: str = DEFAULT_SCORING
) -> None:
    """Judge every test of a found exercise against the reference; score it (of ``er.max_score``) by the
    ``scoring`` rule (:func:`pagedlab.grading.points.exercise_score`)."""
    ex = registry.get(er.exercise)
    earned: list[bool] = []
    for test in ex.tests:
        key = (er.exercise, test.title, test.hidden)
        got = transcripts.get(key)
        out = judge(ex, test, reference_transcript(ex, test), got if got is not None else [])
        if got is None and out.status not in ("passed", "unavailable"):
            out.status = "error"
            out.message = (
                "this test did not run: the grading process stopped before it"
                if not done
                else "this test did not run (hidden tests skipped?)"
            )
        er.outcomes.append(out)
        if test.hidden and not out.passed:  # numbered as the reports number them: titles are the instructor's
            label = f"hidden test {sum(o.hidden for o in er.outcomes)}"
            inputs = json.dumps([test.title, reference_transcript(ex, test)], default=str)
            er.hidden_why.append(hidden_failure(label, out, got, transcripts.get(("seconds", *key)), inputs))
        # a test broken on the reference costs nobody; one that cannot run on this machine ("unavailable")
        # earns nobody anything
        earned.append(out.passed or out.status == "internal")
    er.score = exercise_score(er.max_score, earned, scoring)


def judge_learner(
    learner: Learner,
    lines: list[dict[str, Any]],
    info: dict[str, Any],
    exercise_ids: list[str],
    memory_mb: int,
    timeout: float,
    reference_earns_points: bool = True,
    points: Mapping[str, float] | None = None,
    scoring: str = DEFAULT_SCORING,
) -> LearnerResult:
    """One learner's result from its driver's lines (untouched by learner code) and process info.

    An exercise whose object is the kit's reference (:attr:`ExerciseResult.reference`) is flagged, and scores 0
    when not ``reference_earns_points``; ``points``: the instructor's per-exercise points
    (:mod:`pagedlab.grading.points`), else the registry's; ``scoring``: ``--scoring``."""
    res = LearnerResult(
        learner, messages=list(learner.problems), seconds=info.get("seconds", 0.0), log=str(info.get("stdout", ""))
    )
    if info.get("error"):
        res.messages.append(info["error"])
    done = any(ln.get("type") == "done" for ln in lines)
    in_notebooks = {
        e for ln in lines if ln.get("type") == "notebook" and isinstance(ln.get("found"), dict) for e in ln["found"]
    }
    transcripts, audit = _read_lines(res, lines, exercise_ids)
    if not learner.notebooks:
        res.status = "invalid"
    elif not done:
        res.status = "timeout" if info.get("timed_out") else "crashed"
        res.messages.append(exit_reason(info.get("rc"), info.get("timed_out", False), timeout, memory_mb))
    for eid in exercise_ids:
        ex = registry.get(eid)
        er = res.exercises.setdefault(eid, ExerciseResult(eid))
        er.max_score = points_of(eid, points)
        if er.found:
            er.flags += audit
            _score_exercise(er, transcripts, done, scoring)
            if er.reference and not reference_earns_points:
                er.withheld = (
                    f"0 points: the object handed in is the kit's reference implementation, not your own code "
                    f"(its tests would have earned {er.score:g}; the instructor can allow it)"
                )
                er.score = 0.0
        elif not er.error:
            er.error = (
                f"missing: no cell '# EXERCISE {eid}' defining {ex.name} was found"
                if done or not learner.notebooks or eid not in in_notebooks
                else "not reached before the grading process stopped"
            )
    if res.status == "ok" and res.exercises and not any(e.found for e in res.exercises.values()):
        res.status = "error"
    return res


#: A course lab's title line (the first markdown cell of ``solutions/NN_*.ipynb`` and ``labs/NN_*.ipynb``).
_LAB_TITLE = re.compile(r"#\s*Lab\s+(\d\d)\b")


def _lab_without_exercises(path: Path | None) -> str:
    """``"00"`` when ``path`` is a lab of this course that has no exercise (lab 00, 09: its title line or the
    ``pagedlab.generated_from`` of ``labs build`` says which), else ""."""
    if path is None:
        return ""
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            return ""
        nb = json.loads(path.read_text(encoding="utf-8"))
        meta = str(nb.get("metadata", {}).get("pagedlab", {}).get("generated_from", ""))
        first: dict[str, Any] = next((c for c in nb.get("cells", []) if c.get("cell_type") == "markdown"), {})
        text = cell_source(first)
    except (OSError, ValueError, AttributeError, TypeError):
        return ""
    m = re.match(r"solutions/(\d\d)_", meta) or _LAB_TITLE.match(text.strip())
    with_exercises = {ex.lab for ex in registry.all_exercises()}
    return m.group(1) if m and m.group(1) not in with_exercises else ""


def _orig_path(copied: str, learner: Learner) -> Path | None:
    m = re.match(r"nb(\d+)_", copied)
    return learner.notebooks[int(m.group(1))] if m and int(m.group(1)) < len(learner.notebooks) else None


def _orig_name(copied: str, learner: Learner) -> str:
    path = _orig_path(copied, learner)
    return path.name if path is not None else copied


# --- the run ----------------------------------------------------------------------------------------------
def _check_options(
    timeout: float, memory_mb: int, jobs: int, hidden_tests: Any | None, exercises: Sequence[str] | None
) -> Path | None:
    """Validate the options and load the hidden tests; return the hidden folder (resolved) or None.

    Raises:
        GradeError: a bad option or a missing hidden-tests folder.
        registry.UnknownExerciseError: an unknown id in ``exercises``.
    """
    if timeout <= 0 or memory_mb < 128 or jobs < 1:
        raise GradeError("--timeout must be > 0, --memory >= 128 (MB) and --jobs >= 1")
    hidden = Path(hidden_tests).resolve() if hidden_tests else None
    registry.unload_hidden_tests()  # this run counts exactly the hidden tests of --hidden-tests
    if hidden is not None:
        if not hidden.is_dir():
            raise GradeError(f"--hidden-tests {hidden_tests}: no such folder")
        registry.load_hidden_tests(hidden)
    for eid in exercises or ():
        registry.get(eid)
    return hidden


def _exercises_found(runs: Sequence[tuple[Learner, list[dict[str, Any]], dict[str, Any]]]) -> list[str]:
    """Ids of the course's exercises that any submission holds (the default of ``--exercises``)."""
    found: set[Any] = set()
    for _lr, lines, _info in runs:
        found |= {ln.get("exercise") for ln in lines if ln.get("type") == "exercise" and ln.get("ok")}
        for ln in lines:
            if ln.get("type") == "notebook" and isinstance(ln.get("found"), dict):
                found |= set(ln["found"])
    known = {ex.id for ex in registry.all_exercises()}
    return sorted(e for e in found if e in known)


@dataclass(frozen=True)
class E2EOptions:
    """The instructor's settings of the end-to-end test (:mod:`pagedlab.grading.e2e`).

    Attributes:
        enabled: run it (``--no-e2e`` turns it off).
        seed: the prompts' seed (None: a fresh random one per run, printed so it can be repeated).
        points: its weight in the score (0: a separate row of the report that adds no points).
        prompts: prompts per configuration; tokens: tokens generated per prompt (greedy).
    """

    enabled: bool = True
    seed: int | None = None
    points: float = 0.0
    prompts: int = 3
    tokens: int = 8


_PLANS: dict[tuple[Any, ...], E2EPlan] = {}


def _e2e_plan(opts: E2EOptions) -> tuple[E2EPlan | None, str]:
    """The end-to-end plan (prompts and the kit's reference tokens; computed once per process and
    seed), or None and why not (turned off, or the model is not cached).

    Raises:
        GradeError: a bad option (points < 0, prompts or tokens out of range).
    """
    if not opts.enabled:
        return None, "turned off (--no-e2e)"
    if opts.points < 0:
        raise GradeError(f"--e2e-points must be >= 0, got {opts.points:g}")
    key = (opts.seed, opts.prompts, opts.tokens)  # seed None: drawn once per process
    if key not in _PLANS:
        seed = opts.seed if opts.seed is not None else secrets.randbelow(2**31)
        try:
            _PLANS[key] = e2e.plan(seed, opts.prompts, opts.tokens)
        except ValueError as err:
            raise GradeError(str(err)) from err
        except PagedLabError as err:  # the model is not cached: the unit tests still grade
            return None, f"the kit's engine could not run: {str(err).splitlines()[0]}"
    return _PLANS[key], ""


def grade(
    submissions: Sequence[Any],
    out: Any = "grading-output",
    hidden_tests: Any | None = None,
    timeout: float = 120.0,
    memory_mb: int = 2048,
    jobs: int = 1,
    exercises: Sequence[str] | None = None,
    quiet: bool = False,
    e2e: E2EOptions | None = None,
    e2e_plan: E2EPlan | None = None,
    reference_earns_points: bool = True,
    roster: Any | None = None,
    points: Mapping[str, float] | None = None,
    scoring: str = DEFAULT_SCORING,
) -> list[LearnerResult]:
    """Grade submissions and write the reports; return one :class:`LearnerResult` per learner.

    Args:
        submissions: notebook files and/or folders (see the module docstring), or learners already
            discovered (:class:`Learner`, taken as they are: the Gradescope entry point builds one).
        out: output folder (created).
        hidden_tests: instructor-only tests folder (never printed, never copied into reports).
        timeout: wall-clock seconds for one learner's notebooks, all exercises together.
        memory_mb: address-space limit of a learner's process.
        jobs: learners graded in parallel.
        exercises: exercise ids to grade (default: every exercise found in any submission).
        quiet: print nothing.
        e2e: the end-to-end test's settings (default :class:`E2EOptions`: on, random prompts, 0 points).
        e2e_plan: the end-to-end plan computed beforehand (a Gradescope image's, ``setup.sh``): used as it is
            when the test is on, instead of serving the kit's reference again.
        reference_earns_points: an exercise handed in as the kit's own implementation earns its tests' points
            (the default; False: 0 points). Flagged either way.
        roster: a roster CSV (:func:`read_roster`) giving the discovered submissions their student ids.
        points: exercise id -> points (:func:`pagedlab.grading.points.parse_points`); the others keep
            their registry points (1).
        scoring: how an exercise earns its points, ``"all-or-nothing"`` (the default) or ``"partial"``
            (:mod:`pagedlab.grading.points`).

    Raises:
        GradeError: no submissions found, or a bad option.
        registry.UnknownExerciseError: an unknown id in ``exercises``.
        reaper.Stopped: SIGINT or SIGTERM arrived; every process it started was killed and every
            temporary folder removed first (stderr says so), and no report was written.
    """

    def say(text: str) -> None:
        if not quiet:  # learner names and texts escaped: a lone surrogate cannot stop the run on a UTF-8 console
            print(printable(text), flush=True)

    from pagedlab.grading import report  # lazy: check()'s machinery (hypothesis, pictures): only a run pays for it

    with reaper.stop_on_signals():  # SIGINT/SIGTERM: every process stopped, every temporary folder removed
        try:
            out_path = Path(out)
            hidden = _check_options(timeout, memory_mb, jobs, hidden_tests, exercises)
            try:
                scoring = parse_scoring(scoring)
            except PointsError as e:
                raise GradeError(str(e)) from e
            ids_by_file = read_roster(roster) if roster is not None else None
            use_interpreter_without_gpu()  # before the end-to-end plan or a reference imports triton
            paths = [s for s in submissions if not isinstance(s, Learner)]
            discovered = discover(paths) if paths else []
            learners = [s for s in submissions if isinstance(s, Learner)] + discovered
            if not learners:
                raise GradeError("no submissions found in " + (", ".join(map(str, submissions)) or "an empty list"))
            out_path.mkdir(parents=True, exist_ok=True)
            say(
                f"pagedlab grade: {len(learners)} submission(s), timeout {timeout:g} s, memory {memory_mb} MB"
                + (", with hidden tests" if hidden else "")
            )
            for warning in name_clashes(discovered):  # a Learner given as it is keeps its name
                say(warning)
            for warning in apply_roster(discovered, ids_by_file) if ids_by_file is not None else []:
                say(warning)
            wanted = list(exercises) if exercises else None
            opts = e2e if e2e is not None else E2EOptions()
            e2e_plan, e2e_note = (e2e_plan, "") if e2e_plan is not None and opts.enabled else _e2e_plan(opts)
            say(e2e_plan.describe() if e2e_plan is not None else f"end-to-end: not run ({e2e_note})")
            job = e2e_plan.job() if e2e_plan is not None else None
            runs = [
                (lr, lines, info)
                for lr, (lines, info) in zip(
                    learners, run_learners(learners, wanted, hidden, timeout, memory_mb, jobs, job)
                )
            ]
            ids = wanted if wanted is not None else _exercises_found(runs)
            _say_containment(runs, say)
            results = [
                judge_learner(lr, lines, info, ids, memory_mb, timeout, reference_earns_points, points, scoring)
                for lr, lines, info in runs
            ]
            for r, (_lr, lines, _info) in zip(results, runs):
                r.e2e = judge_e2e(lines, e2e_plan, opts.points, e2e_note)
            report.write_all(out_path, results, ids, runs)
            _say_results(results, say)
            say(f"wrote {out_path / 'grades.csv'}, {out_path / report.COMBINED_NAME}, {out_path / 'feedback'}/")
            return results

        finally:  # the hidden tests leave with the run: a later check() or grade() in this process
            registry.unload_hidden_tests()  # (the Jupyter kernel of an instructor, a test session) never runs them


def _say_containment(
    runs: Sequence[tuple[Learner, list[dict[str, Any]], dict[str, Any]]], say: Callable[[str], None]
) -> None:
    """A warning for each reason a learner's process ran without part of the kernel containment."""
    missing = sorted(
        {
            str(m)
            for _lr, lines, _info in runs
            for ln in lines
            if ln.get("type") == "containment"
            for m in ln.get("missing") or []
        }
    )
    for why in missing:
        say(
            f"WARNING: learner processes ran without part of their kernel containment: {why}. The Python-level "
            "guard and the resource limits still held (instructor guide, section 7)"
        )


def _say_results(results: Sequence[LearnerResult], say: Callable[[str], None]) -> None:
    """Pass to ``say`` the tests that fail on the reference itself, then one score line per learner."""
    broken = sorted(
        {
            f"{o.exercise}: {'hidden test' if o.hidden else o.title}"
            for r in results
            for er in r.exercises.values()
            for o in er.outcomes
            if o.status == "internal"
        }
    )
    for b in broken:
        say(f"warning: test '{b}' fails on the reference implementation itself; its points were given to everyone")
    unavailable = {
        f"{o.exercise}: {'hidden test' if o.hidden else o.title}": o.message
        for r in results
        for er in r.exercises.values()
        for o in er.outcomes
        if o.status == "unavailable"
    }
    for test, why in sorted(unavailable.items()):
        say(f"WARNING: test '{test}' could not be checked on this machine; nobody earned its points ({why})")
    for r in results:
        status = "" if r.status == "ok" else f"  [{r.status}]"
        say(f"  {r.learner.name:<24} {r.score:6.2f} / {r.max_score:<6.2f}{status}")
        if r.e2e is not None and r.e2e.status != "not run":
            say(f"  {'':<24} {r.e2e.line}")


# --- CLI --------------------------------------------------------------------------------------------------
def add_limit_arguments(parser: argparse.ArgumentParser, timeout: float, memory_mb: int, per: str) -> None:
    """The ``--timeout`` (seconds) and ``--memory`` (MB) options of ``pagedlab grade`` and
    ``pagedlab gradescope-bundle``, with their defaults; ``per``: what one limit applies to."""
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=float,
        default=timeout,
        help=f"wall-clock seconds per {per}, all notebooks together (default: %(default)s)",
    )
    parser.add_argument(
        "--memory",
        metavar="MB",
        type=int,
        default=memory_mb,
        help=f"memory (address space) limit of the {per}'s process (default: %(default)s)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "submissions",
        nargs="+",
        metavar="SUBMISSIONS",
        help="notebooks and/or folders (a folder holds one notebook or subfolder per learner)",
    )
    parser.add_argument(
        "--hidden-tests", metavar="DIR", default=None, help="folder of instructor-only test files (never printed)"
    )
    parser.add_argument("--out", metavar="DIR", default="grading-output", help="output folder (default: %(default)s)")
    add_limit_arguments(parser, 120.0, 2048, "learner")
    parser.add_argument("--jobs", metavar="N", type=int, default=1, help="learners graded in parallel (default: 1)")
    parser.add_argument(
        "--roster",
        metavar="CSV",
        default=None,
        help="a CSV with columns 'file' (a submitted file or folder: its name or path) and 'student_id': "
        "grades.csv then has each submission's student id",
    )
    parser.add_argument(
        "--exercises",
        metavar="ID",
        nargs="+",
        default=None,
        help="grade these exercise ids (default: every exercise found in any submission)",
    )
    add_points_argument(parser)
    add_scoring_argument(parser)
    add_e2e_arguments(parser)
    add_reference_argument(parser)


def add_reference_argument(parser: argparse.ArgumentParser) -> None:
    """``--reference-earns-points`` (``pagedlab grade`` and ``pagedlab gradescope-bundle``)."""
    parser.add_argument(
        "--reference-earns-points",
        choices=("yes", "no"),
        nargs="?",
        const="yes",
        default="yes",
        help="does an exercise handed in as the kit's own implementation (use_reference, an import, a subclass, an "
        "exec or a copy of the shipped solution) earn its tests' points? (default: yes; flagged either way)",
    )


def add_e2e_arguments(parser: argparse.ArgumentParser) -> None:
    """The end-to-end test's options (``pagedlab grade`` and ``pagedlab gradescope-bundle``)."""
    parser.add_argument(
        "--no-e2e", action="store_true", help="skip the end-to-end test (parts plugged into the engine)"
    )
    parser.add_argument(
        "--e2e-seed", metavar="N", type=int, default=None, help="seed of the end-to-end prompts (default: random)"
    )
    parser.add_argument(
        "--e2e-points",
        metavar="P",
        type=float,
        default=0.0,
        help="points of the end-to-end test (default 0: a separate row of the report, not counted)",
    )


def e2e_options(args: argparse.Namespace) -> E2EOptions:
    """:class:`E2EOptions` from the options :func:`add_e2e_arguments` added (defaults where absent).

    Raises:
        GradeError: ``--e2e-points`` below 0.
    """
    opts = E2EOptions(
        not getattr(args, "no_e2e", False), getattr(args, "e2e_seed", None), getattr(args, "e2e_points", 0.0)
    )
    if opts.points < 0:
        raise GradeError(f"--e2e-points must be >= 0, got {opts.points:g}")
    return opts


def main(args: argparse.Namespace) -> int:
    missing = [str(s) for s in args.submissions if not Path(s).exists()]
    if missing:  # a mistyped folder must not yield an empty report and exit 0
        raise GradeError(f"no such file or folder: {', '.join(missing)}; nothing was graded")
    try:
        opts = e2e_options(args)
        grade(
            args.submissions,
            args.out,
            args.hidden_tests,
            args.timeout,
            args.memory,
            args.jobs,
            args.exercises,
            e2e=opts,
            reference_earns_points=args.reference_earns_points == "yes",
            roster=args.roster,
            points=parse_points(args.points),
            scoring=args.scoring,
        )
    except registry.UnknownExerciseError as e:
        raise GradeError(str(e)) from e
    except reaper.Stopped as e:  # what was stopped and removed is on stderr already
        return 128 + e.signum
    return 0
