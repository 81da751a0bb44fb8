"""The exercise registry: what each lab asks the learner to write, and how it is tested.

An :class:`Exercise` names the object the learner defines (``"FreeKVCacheBlockQueue"``), says
where its reference implementation comes from, and carries its tests. A test is a *driver*::

    @EX.test("popleft takes the least recently used block")
    def _(Queue, rec):                 # the learner's class (or the reference), a Recorder
        q = Queue(blocks(4))
        rec.step("q.popleft()")
        rec.observe("block returned", q.popleft().block_id)

The framework runs every driver twice - on the reference and on the learner's object - and
compares the two transcripts (:mod:`pagedlab.grading.judge`). A driver may also raise
``AssertionError`` (or :class:`~pagedlab.grading.recorder.Fail`) with a teaching message for
things it checks on its own.

The grader holds no exercise. The course (``pagedlab/course/exercises/labNN.py``, one module per lab)
registers its exercises here (:func:`register`) and its solution cells (:func:`register_solutions`)
when it is imported; the grader imports it on first use under the one name it knows,
:data:`DEFAULT_COURSE` (the single documented entry point; the top layer may hand it another with
:func:`use_course`, and ``pagedlab grade`` passes the name on to its processes). Instructor-only hidden tests are Python files in a folder given at grading time
(:func:`load_hidden_tests`); they use :func:`hidden_test`.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import linecache
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagedlab.grading import runner

__all__ = [
    "Exercise",
    "Test",
    "register",
    "get",
    "all_exercises",
    "find_by_name",
    "load_all",
    "use_course",
    "course_module",
    "register_solutions",
    "solutions_dir",
    "DEFAULT_COURSE",
    "load_hidden_tests",
    "unload_hidden_tests",
    "hidden_test",
    "snippet_path",
    "snippet_source",
    "snippet_object",
    "UnknownExerciseError",
]

#: The course the grader serves unless told otherwise: the module whose import registers every exercise.
#: The single documented entry point between the grader and the course; nothing else in
#: ``pagedlab.grading`` names the course (tests/test_layers.py checks it).
DEFAULT_COURSE = "pagedlab.course.exercises"


class UnknownExerciseError(LookupError):
    """No exercise has that id, or an object's name matches none (or several)."""


Invariant = tuple[str, Callable[[Any], str | None]]


@dataclass
class Test:
    """One test of an exercise.

    Attributes:
        title: shown to the learner ("popleft takes the least recently used block").
        drive: ``drive(obj, rec)``; runs the object, records observations.
        hidden: an instructor-only test (loaded from ``--hidden-tests``); its details are never shown.
        timeout: seconds one run of the driver may take (check() and the grader enforce it).
        source: file the test was defined in (for instructors' error messages).
    """

    title: str
    drive: Callable[[Any, Any], None]
    hidden: bool = False
    timeout: float = 10.0
    source: str = ""


@dataclass
class Exercise:
    """One exercise.

    Attributes:
        id: ``"<lab>.<slug>"``, e.g. ``"02.free_queue"``; the ``# EXERCISE <id>`` line of the cell.
        lab: two-digit lab number as a string.
        name: what the learner defines (function or class name).
        summary: one line shown by check() and in feedback.
        reference: zero-argument loader of the reference object; ``None`` means "the object the
            solution snippet defines".
        render: ``render(state, expected_state, at) -> svg`` draws a recorded state (``at`` is the
            path of the first differing value, or None); None means no picture.
        invariants: ``(name, fn)`` pairs; ``fn(state) -> message or None`` runs on every state the
            learner's run records; the first broken one is reported with its name.
        points: weight in grades (split evenly among the tests, hidden ones included).
        components: extra names under which :func:`pagedlab.grading.use_reference` knows it.
        needs: modules the tests import (``"torch"``): the grader only pays for them when needed.
        runs_in_learner_process: the learner's object cannot cross ``pagedlab grade``'s plain-data
            pipe (a ``@triton.jit`` function that the kit's kernels take as a ``tl.constexpr``), so
            the grader runs this exercise's public drivers inside the learner's process and receives
            only the transcripts (the trusted process still computes the reference and judges; see
            docs/instructor_guide.md, section 7). Hidden tests are not supported for it
            (:func:`hidden_test` raises ``ValueError``).
    """

    id: str
    name: str
    summary: str
    reference: Callable[[], Any] | None = None
    render: Callable[..., str] | None = None
    invariants: list[Invariant] = field(default_factory=list)
    points: float = 1.0
    components: Sequence[str] = ()
    needs: Sequence[str] = ()
    runs_in_learner_process: bool = False
    tests: list[Test] = field(default_factory=list)

    @property
    def lab(self) -> str:
        return self.id.split(".", 1)[0]

    # --- authoring -----------------------------------------------------------------------------
    def test(self, title: str, *, hidden: bool = False, timeout: float = 10.0) -> Callable:
        """Decorator adding a test driver ``drive(obj, rec)`` (see the module docstring)."""

        def deco(fn: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
            if any(t.title == title and t.hidden == hidden for t in self.tests):
                raise ValueError(f"exercise {self.id}: two tests titled {title!r}")
            src = getattr(getattr(fn, "__code__", None), "co_filename", "")
            self.tests.append(Test(title, fn, hidden=hidden, timeout=timeout, source=src))
            return fn

        return deco

    def invariant(self, name: str) -> Callable:
        """Decorator adding an invariant ``fn(state) -> message or None``."""

        def deco(fn: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
            self.invariants.append((name, fn))
            return fn

        return deco

    def public_tests(self) -> list[Test]:
        return [t for t in self.tests if not t.hidden]

    def hidden_tests(self) -> list[Test]:
        return [t for t in self.tests if t.hidden]

    def get_reference(self) -> Any:
        """The reference object (cached)."""
        with _lock:
            if self.id not in _reference_cache:
                _reference_cache[self.id] = self.reference() if self.reference else snippet_object(self.id)
            return _reference_cache[self.id]


_REGISTRY: dict[str, Exercise] = {}
_reference_cache: dict[str, Any] = {}
_lock = threading.RLock()
_loaded = False
_course = DEFAULT_COURSE
#: Folder holding each exercise's canonical solution cell (``<lab>_<slug>.py``), as the course registered it.
_solutions: Path | None = None
_hidden_loaded: dict[str, list[tuple[str, Test]]] = {}
_hidden_counter = itertools.count()


def register(ex: Exercise) -> Exercise:
    """Add an exercise (ids are unique)."""
    if "." not in ex.id or not ex.id.split(".", 1)[0].isdigit():
        raise ValueError(f"exercise id must look like '02.free_queue', got {ex.id!r}")
    if ex.id in _REGISTRY and _REGISTRY[ex.id] is not ex:
        raise ValueError(f"exercise {ex.id} registered twice")
    _REGISTRY[ex.id] = ex
    return ex


def use_course(module: str) -> None:
    """Serve the course ``module`` (importing it registers its exercises) instead of :data:`DEFAULT_COURSE`.

    Raises:
        ValueError: a course is already loaded (the registry serves one course per process).
    """
    global _course
    with _lock:
        if _loaded and module != _course:
            raise ValueError(f"the course {_course} is already loaded; use_course({module!r}) must come first")
        _course = module


def course_module() -> str:
    """The module name of the course this process serves (the grader hands it to its processes)."""
    return _course


def register_solutions(folder: os.PathLike | str) -> None:
    """The course's folder of solution cells (``<lab>_<slug>.py``); the course calls it once on import."""
    global _solutions
    _solutions = Path(folder).resolve()


def solutions_dir() -> Path:
    """The folder of the served course's solution cells.

    Raises:
        UnknownExerciseError: the course registered none.
    """
    load_all()
    if _solutions is None:
        raise UnknownExerciseError(f"the course {_course} registered no folder of solution cells")
    return _solutions


def load_all() -> None:
    """Import the course (once): its import registers every exercise (:func:`register`)."""
    global _loaded
    with _lock:
        if _loaded:
            return
        importlib.import_module(_course)
        _loaded = True


def all_exercises() -> list[Exercise]:
    """Every registered exercise, by id."""
    load_all()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get(exercise_id: str) -> Exercise:
    """The exercise with this id.

    Raises:
        UnknownExerciseError: no such id (the message lists the known ones).
    """
    load_all()
    if exercise_id in _REGISTRY:
        return _REGISTRY[exercise_id]
    known = ", ".join(sorted(_REGISTRY))
    raise UnknownExerciseError(f"no exercise {exercise_id!r}; known exercises: {known}")


def find_by_name(name: str) -> list[Exercise]:
    """Exercises whose learner-facing name is ``name``."""
    load_all()
    return [ex for ex in all_exercises() if ex.name == name]


# --- solution snippets ----------------------------------------------------------------------------
def snippet_path(exercise_id: str) -> Path:
    """``<solutions folder>/<lab>_<slug>.py`` for ``"<lab>.<slug>"``."""
    lab, slug = exercise_id.split(".", 1)
    return solutions_dir() / f"{lab}_{slug}.py"


def snippet_source(exercise_id: str) -> str:
    """The canonical solution cell of an exercise, exactly as a notebook cell holds it."""
    return snippet_path(exercise_id).read_text(encoding="utf-8")


def snippet_object(exercise_id: str, source: str | None = None) -> Any:
    """Execute a solution (or stub) cell in a fresh namespace and return the exercise's object."""
    ex = _REGISTRY.get(exercise_id) or get(exercise_id)
    src = snippet_source(exercise_id) if source is None else source
    ns: dict[str, Any] = {"__name__": f"pagedlab_exercise_{ex.lab}"}
    # a cell other than the solution gets its own name: linecache must not show the solution's lines
    filename = f"<solution {exercise_id}>" if source is None else f"<cell {exercise_id} {abs(hash(src)):x}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    code = compile(src, filename, "exec")
    exec(code, ns)  # noqa: S102 - our own snippet
    if ex.name not in ns:
        raise UnknownExerciseError(f"the solution cell of {exercise_id} does not define {ex.name}")
    return ns[ex.name]


# --- hidden tests ---------------------------------------------------------------------------------
def hidden_test(exercise_id: str, title: str, *, timeout: float = 10.0) -> Callable:
    """Decorator for instructor-only tests, used in the files of a hidden-tests folder::

        from pagedlab.grading import hidden_test

        @hidden_test("02.free_queue", "remove the only block")
        def _(Queue, rec): ...

    The test runs like a public one; learners see only whether it passed.

    Raises:
        UnknownExerciseError: no such exercise.
        ValueError: the exercise runs in the learner's process (``runs_in_learner_process``): its
            tests would have to enter that process, and hidden tests never do.
    """
    ex = get(exercise_id)
    if ex.runs_in_learner_process:
        raise ValueError(
            f"hidden tests are not supported for {exercise_id}: its tests run in the learner's "
            "process under `pagedlab grade`, and hidden tests never enter it (instructor guide, "
            "section 6); make it a public test instead"
        )
    return ex.test(title, hidden=True, timeout=timeout)


def load_hidden_tests(folder: os.PathLike | str) -> list[tuple[str, str]]:
    """Execute every ``*.py`` file of ``folder`` (sorted, non-recursive) once, registering its tests.

    Returns:
        ``(exercise_id, title)`` of the hidden tests the folder defines.

    Raises:
        FileNotFoundError: the folder does not exist.
        UnknownExerciseError: a file names an unknown exercise.
    """
    path = Path(folder).resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"hidden-tests folder {folder} does not exist")
    load_all()
    key = str(path)
    with _lock:
        if key not in _hidden_loaded:
            added: list[tuple[str, Test]] = []
            for f in sorted(path.glob("*.py")):
                before = {ex.id: len(ex.tests) for ex in _REGISTRY.values()}
                spec = importlib.util.spec_from_file_location(f"pagedlab_hidden_{next(_hidden_counter)}_{f.stem}", f)
                assert spec is not None and spec.loader is not None
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                for ex in _REGISTRY.values():
                    for t in ex.tests[before.get(ex.id, 0) :]:
                        added.append((ex.id, t))
            _hidden_loaded[key] = added
        return [(eid, t.title) for eid, t in _hidden_loaded[key]]


def unload_hidden_tests() -> None:
    """Forget every hidden test loaded so far (the grader starts from a clean set)."""
    with _lock:
        for ex in _REGISTRY.values():
            ex.tests[:] = [t for t in ex.tests if not t.hidden]
        _hidden_loaded.clear()

    runner.forget_hidden_references()
