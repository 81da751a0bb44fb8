"""Exercises, instant checks and grading for the pagedlab labs.

In a notebook::

    from pagedlab.grading import check, use_reference
    check(FreeKVCacheBlockQueue)          # run exercise 02.free_queue's tests on your class
    use_reference("free_queue")           # stuck? continue with the kit's implementation

For instructors: ``pagedlab grade submissions/`` (:mod:`pagedlab.grading.grade`), hidden tests
(:func:`hidden_test`), and the exercise registry (:mod:`pagedlab.grading.registry`). The exercises
themselves, their solution cells and lab building are the course's package, which registers them
here (the registry's ``DEFAULT_COURSE``; how to add an exercise: that package's ``exercises``).

Modules, by the process their lines run in (docs/instructor_guide.md, section 7, draws them):

* the notebook (check()): ``checking``, ``registry``, ``runner``, ``recorder``, ``judge``, ``differential``,
  ``contract``, ``references`` (``use_reference``, ``yours_or_reference``), ``kit`` (the learner-facing name of
  ``pagedlab.analysis.kit``), ``snapshots``, ``text``; the learner's parts in the engine: ``plug``, ``serve``;
* ``pagedlab grade``'s grader process (never runs learner code): ``grade`` (the run and the CLI),
  ``submissions``, ``supervisor``, ``e2e`` (plan and verdict), ``report``, ``points``, ``gradescope``,
  ``triton_mode``, ``guide``;
* its driver process (trusted, one per learner): ``driver``, ``e2e_driver``, ``extract``, ``provenance``;
* its learner's process (untrusted): ``sandbox``, ``e2e_learner`` - on ``pagedlab.containment``.

Failure pictures are drawn by ``pagedlab.viz``.
"""

from __future__ import annotations

from typing import Any

from pagedlab.containment import rpc as _rpc

# The grader's own modules: the trusted end of pagedlab grade's pipe never hands an object of theirs to the
# learner's code (registry, tests, recorders, the comparison, the processes).
_rpc.deny_modules(
    "pagedlab.grading.registry",
    "pagedlab.grading.runner",
    "pagedlab.grading.recorder",
    "pagedlab.grading.judge",
    "pagedlab.containment.rpc",
    "pagedlab.grading.driver",
    "pagedlab.grading.grade",
    "pagedlab.grading.sandbox",
    "pagedlab.grading.checking",
    "pagedlab.grading.report",
    "pagedlab.grading.references",
    "pagedlab.grading.gradescope",
)

__all__ = [
    "check",
    "use_reference",
    "yours_or_reference",
    "components",
    "hidden_test",
    "CheckResult",
    "Fail",
    "my_engine",
    "serve_with",
]


def __getattr__(name: str) -> Any:
    # Lazy: importing pagedlab.grading stays cheap (labs_build and the CLI import it).
    if name in ("check", "CheckResult"):
        from pagedlab.grading import checking as _check_mod  # lazy: start-up time (checking loads pagedlab.viz)

        return getattr(_check_mod, name)
    if name in ("use_reference", "yours_or_reference", "components"):
        from pagedlab.grading import references  # lazy: no grader module at `import pagedlab.grading`

        return getattr(references, name)
    if name in ("my_engine", "serve_with"):
        from pagedlab.grading import plug  # lazy: start-up time (plug loads torch)

        return getattr(plug, name)
    if name == "hidden_test":
        from pagedlab.grading.registry import hidden_test  # lazy: no grader module at `import pagedlab.grading`

        return hidden_test
    if name == "Fail":
        from pagedlab.grading.recorder import Fail  # lazy: no grader module at `import pagedlab.grading`

        return Fail
    raise AttributeError(f"module 'pagedlab.grading' has no attribute {name!r}")
