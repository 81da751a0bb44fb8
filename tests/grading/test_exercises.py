"""Two-way checks for every exercise: the solution cell passes and the generated stub fails (the wrong
versions are in test_wrong_versions.py)."""

from __future__ import annotations

import pytest

from pagedlab.grading import registry
from pagedlab.grading.checking import check
from pagedlab.grading.extract import MARKER_RE
from tests.grading.helpers import stub_source

EXERCISES = [ex.id for ex in registry.all_exercises()]


def test_every_exercise_has_tests():
    for ex in registry.all_exercises():
        assert ex.public_tests(), ex.id
        assert ex.summary and ex.name


@pytest.mark.parametrize("eid", EXERCISES)
def test_solution_cell_format(eid):
    src = registry.snippet_source(eid)
    first = src.splitlines()[0]
    m = MARKER_RE.match(first)
    assert m and m.group(1) == eid, f"first line must be '# EXERCISE {eid}'"
    assert "### BEGIN SOLUTION" in src and "### END SOLUTION" in src
    ex = registry.get(eid)
    assert f"def {ex.name}(" in src or f"class {ex.name}" in src


@pytest.mark.parametrize("eid", EXERCISES)
def test_solution_passes(eid):
    res = check(registry.snippet_object(eid), eid, show=False)
    assert res.passed, res.text()


@pytest.mark.parametrize("eid", EXERCISES)
def test_generated_stub_fails_as_not_implemented(eid):
    stub = stub_source(eid)
    assert "raise NotImplementedError" in stub and "### BEGIN SOLUTION" not in stub
    res = check(registry.snippet_object(eid, stub), eid, show=False)
    assert not res.passed
    assert all(o.status == "not_implemented" for o in res.outcomes), res.text()
    assert "not implemented yet" in res.text()


def test_references_are_cached_and_library_backed():
    from pagedlab.core.block_pool import FreeKVCacheBlockQueue

    assert registry.get("02.free_queue").get_reference() is FreeKVCacheBlockQueue
    assert registry.get("07.insert").get_reference() is registry.get("07.insert").get_reference()


def test_lab03_test_scripts_reject_an_unknown_move():
    from pagedlab.course.exercises.lab03 import World, _play

    w = World(4, 4)
    _play("A=5", w, rec=None)  # a prefill records nothing
    assert list(w.seqs) == ["A"] and w.seqs["A"].block_table == [0, 1] and w.seqs["A"].num_tokens == 5
    with pytest.raises(ValueError, match=r"unknown move 'A\?'"):
        _play("A?", w, rec=None)
    with pytest.raises(ValueError, match="unknown move 'A\\+'"):  # an append without append_token under test
        _play("A+", w, rec=None)
