"""The two-way check on the real notebooks: every exercise cell of solutions/ passes its tests, and
the same exercise in labs/ (the generated stub) fails. Runs only the exercise cells and the imports
they need, so it stays fast; notebooks without exercise cells contribute nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagedlab.grading.checking import check
from pagedlab.grading.extract import exercise_names, find_exercises, load_exercises, read_notebook

ROOT = Path(__file__).resolve().parents[2]
NAMES = exercise_names()


def _cells(folder: str):
    out = []
    for nb_path in sorted((ROOT / folder).glob("*.ipynb")):
        ext = find_exercises(read_notebook(nb_path), NAMES)
        out += [(nb_path, eid) for eid in ext.cells]
    return out


SOLUTION_CELLS = _cells("solutions")
LAB_CELLS = _cells("labs")


def _load(nb_path: Path):
    ext = find_exercises(read_notebook(nb_path), NAMES)
    return load_exercises(ext, NAMES, label=nb_path.name)


@pytest.mark.parametrize(
    "nb_path,eid",
    SOLUTION_CELLS or [pytest.param(None, None, marks=pytest.mark.skip(reason="no exercise cells in solutions/ yet"))],
    ids=lambda v: getattr(v, "name", v),
)
def test_solution_notebook_exercise_passes(nb_path, eid):
    assert eid in NAMES, f"{nb_path.name}: '# EXERCISE {eid}' is not a registered exercise"
    le = _load(nb_path)[eid]
    assert le.ok, f"{nb_path.name}: {le.error}"
    res = check(le.obj, eid, show=False)
    assert res.passed, res.text()


@pytest.mark.parametrize(
    "nb_path,eid",
    LAB_CELLS or [pytest.param(None, None, marks=pytest.mark.skip(reason="no exercise cells in labs/ yet"))],
    ids=lambda v: getattr(v, "name", v),
)
def test_lab_notebook_exercise_is_a_failing_stub(nb_path, eid):
    le = _load(nb_path)[eid]
    assert le.ok, f"{nb_path.name}: {le.error}"
    res = check(le.obj, eid, show=False)
    assert not res.passed and res.first_failure.status == "not_implemented", res.text()


def test_every_exercise_in_labs_is_also_in_solutions():
    assert {e for _, e in LAB_CELLS} <= {e for _, e in SOLUTION_CELLS}
