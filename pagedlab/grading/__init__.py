"""Exercises, instant checks and grading for the pagedlab labs.

In a notebook::

    from pagedlab.grading import check, use_reference
    check(FreeKVCacheBlockQueue)          # run exercise 02.free_queue's tests on your class
    use_reference("free_queue")           # stuck? continue with the kit's implementation

For instructors: ``pagedlab grade submissions/`` (:mod:`pagedlab.grading.grade`), hidden tests
(:func:`hidden_test`), and the exercise registry (:mod:`pagedlab.grading.registry`). The exercises
themselves, their solution cells and lab building are the course's package, which registers them
here (the registry's ``DEFAULT_COURSE``; how to add an exercise: that package's ``exercises``).

Modules: ``registry`` (exercises and tests), ``recorder`` (transcripts as plain data), ``runner``
(running a test under a time limit), ``judge`` (comparing transcripts, teaching messages),
``checking`` (check(): notebook feedback), ``extract`` (exercise cells out of a notebook), ``sandbox`` (the
learner process of the grader: the learner's definitions only), ``driver`` (the grader's trusted process
running the tests), ``rpc`` (calls between the two, as plain data), ``grade`` / ``report`` (the CLI and its
files), ``gradescope`` (the autograder zip), ``references`` (``use_reference``, ``yours_or_reference``),
``kit`` (the learner-facing name of ``pagedlab.analysis.kit``). Failure pictures are drawn by ``pagedlab.viz``.
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
        from pagedlab.grading import checking as _check_mod

        return getattr(_check_mod, name)
    if name in ("use_reference", "yours_or_reference", "components"):
        from pagedlab.grading import references

        return getattr(references, name)
    if name in ("my_engine", "serve_with"):
        from pagedlab.grading import plug

        return getattr(plug, name)
    if name == "hidden_test":
        from pagedlab.grading.registry import hidden_test

        return hidden_test
    if name == "Fail":
        from pagedlab.grading.recorder import Fail

        return Fail
    raise AttributeError(f"module 'pagedlab.grading' has no attribute {name!r}")
