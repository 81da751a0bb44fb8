"""The labs' timing notes (pagedlab/course/timing_notes.py): the prose and the cells' figures agree, and the nbval
run of the solutions (solutions/conftest.py) fails when a cell does not fit its note."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from pagedlab.course import timing_notes
from pagedlab.i18n import notebooks

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((REPO / "solutions").glob("[0-9][0-9]_*.ipynb"))


def _nb(*cells: tuple[str, str, int | None]) -> dict:
    """A notebook of (kind, source, up_to_s) cells."""
    out = []
    for k, (kind, source, up_to) in enumerate(cells):
        meta = {"pagedlab": {timing_notes.KEY: up_to}} if up_to is not None else {}
        out.append({"cell_type": kind, "id": f"c{k}", "source": source, "metadata": meta})
    return {"cells": out}


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_each_labs_notes_match_its_cells_figures(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert timing_notes.note_problems(nb) == []
    # the Chinese edition says the same figures (its catalog's translation of each noted cell)
    zh, _ = notebooks.translate_notebook(nb, notebooks.read(notebooks.catalog_path(path, "zh")), "zh")
    assert timing_notes.note_problems(zh) == []


def test_the_slow_cells_have_notes():
    """The labs' slowest cells (nbval, CI: lab 03's sharing measurement, lab 04's two engines, lab 09's capstone)
    say how long they take."""
    noted = {p.stem: timing_notes.claims(json.loads(p.read_text(encoding="utf-8"))) for p in SOLUTIONS}
    assert set(noted["03_copy_on_write"]) == {"lab03-17"}
    assert set(noted["04_continuous_batching"]) == {"lab04-10"}
    assert set(noted["09_engine_and_vllm"]) == {"7485714b"}


@pytest.mark.parametrize(
    ("cells", "problem"),
    [
        ([("markdown", "slow (20 to 60 seconds)", None), ("code", "x", 30)], "typed range"),
        ([("markdown", "up to 20 s", None), ("code", "x", 30)], "must say 'up to 30 s' once, it says [20]"),
        ([("markdown", "nothing", None), ("code", "x", 30)], "it says nothing"),
        ([("markdown", "up to 30 s, up to 30 s", None), ("code", "x", 30)], "it says [30, 30]"),
        ([("code", "x", 30), ("markdown", "up to 30 s", None)], "is about no later code cell"),
        ([("markdown", "up to 0 s", None), ("code", "x", 0)], "positive whole number"),
        ([("markdown", "最多 12 秒", None), ("code", "x", 30)], "it says [12]"),
    ],
)
def test_a_wrong_note_is_named(cells, problem):
    found = timing_notes.note_problems(_nb(*cells))
    assert any(problem in p for p in found), found


def test_notes_that_fit_pass():
    ok = _nb(
        ("markdown", "up to 30 s on two cores", None),
        ("code", "predict()", None),
        ("code", "slow()", 30),
        ("markdown", "在双核机器上最多 9 秒", None),
        ("code", "slower()", 9),
    )
    assert timing_notes.note_problems(ok) == []
    assert timing_notes.claims(ok) == {"c2": 30, "c4": 9}


@pytest.mark.parametrize(
    ("claimed", "measured", "ok"),
    [(30, 30.0, True), (30, 7.5, True), (30, 30.1, False), (30, 7.4, False), (1, 0.2, False)],
)
def test_a_note_holds_between_its_figure_and_a_quarter_of_it(claimed, measured, ok):
    assert (timing_notes.check(claimed, measured) is None) is ok
    # off CI only the upper bound holds: a faster machine makes "up to N s" truer
    assert (timing_notes.check(claimed, measured, too_loose=False) is None) is (measured <= claimed)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadfile"]], ids=["one process", "xdist"])
def test_the_nbval_run_fails_on_a_note_the_cell_does_not_fit(tmp_path, workers):
    """solutions/conftest.py in a real nbval run (alone, and on pytest-xdist workers as make test runs it): the
    cells with a too-loose note and a too-tight one fail (each message naming both figures), the fitting one
    passes, and all three are recorded with their measured times."""
    kit = tmp_path / "kit"
    (kit / "solutions").mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "conftest.py", kit / "solutions" / "conftest.py")
    nb = nbformat.v4.new_notebook()
    for k, (source, up_to) in enumerate([("x = 1", 200), ("import time; time.sleep(1.6)", 1), ("time.sleep(1.2)", 3)]):
        cell = nbformat.v4.new_code_cell(source)
        cell.id = f"cell{k}"
        cell.metadata["pagedlab"] = {timing_notes.KEY: up_to}
        nb.cells.append(cell)
    nbformat.write(nb, kit / "solutions" / "t.ipynb")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "solutions",
            "--nbval-lax",
            "--nbval-current-env",
            "-p",
            "no:cacheprovider",
            *workers,
        ],
        cwd=kit,
        env={**os.environ, "CI": "true"},  # the too-loose note is judged on CI's machine only
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "2 failed, 1 passed" in out, out  # every cell ran; the notes alone failed two
    wrong = [line for line in out.splitlines() if line.startswith("TIMING NOTE WRONG")]  # the failures' messages
    assert len(wrong) == 2 and "cell0" in wrong[0] and "too loose" in wrong[0], wrong
    assert "cell1" in wrong[1] and "over its note's 1 s" in wrong[1], wrong
    times = json.loads((kit / "tests" / "artifacts" / "notebook_times.json").read_text())
    notes = times["notebooks"]["t.ipynb"]["timing_notes"]
    assert notes["cell2"]["ok"] is True and 1.2 <= notes["cell2"]["measured_s"] <= 3
    assert [notes[c]["ok"] for c in ("cell0", "cell1")] == [False, False]
