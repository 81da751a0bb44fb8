"""The grader's internals that an exercise cell is flagged for importing are derived from the package."""

from __future__ import annotations

import pkgutil

import pagedlab.grading as grading
from pagedlab.grading.driver import LEARNER_FACING, static_flags


def test_every_grading_module_but_the_learner_facing_ones_is_flagged():
    modules = {m.name for m in pkgutil.iter_modules(grading.__path__)}
    assert modules > LEARNER_FACING and {"registry", "points", "provenance", "sandbox"} <= modules
    for name in sorted(modules - LEARNER_FACING):
        for cell in (f"from pagedlab.grading import {name}\n", f"import pagedlab.grading.{name} as m\n"):
            assert static_flags(cell, "x", set()) == [f"imports the grader's internals (pagedlab.grading.{name})"], cell
    for name in sorted(LEARNER_FACING):
        assert static_flags(f"from pagedlab.grading import {name}\n", "x", set()) == [], name
    # the package's own names are not modules: importing check or use_reference is no internals flag
    assert static_flags("from pagedlab.grading import check, use_reference\n", "x", set()) == []


def test_the_containment_layer_and_the_course_exercises_are_internals_too():
    import pagedlab.containment as containment

    names = {m.name for m in pkgutil.iter_modules(containment.__path__)}
    assert {"rpc", "kernel", "reaper", "guard"} <= names
    for name in sorted(names):
        cell = f"from pagedlab.containment import {name}\n"
        assert static_flags(cell, "x", set()) == [f"imports the grader's internals (pagedlab.containment.{name})"]
    for cell in ("from pagedlab.course.exercises import lab02\n", "import pagedlab.course.exercises.lab07 as t\n"):
        assert static_flags(cell, "x", set()) == ["imports the grader's internals (pagedlab.course.exercises)"], cell
    assert static_flags("from pagedlab.course.capstone import capstone\n", "x", set()) == []
