"""The nbgrader route, run through the real nbgrader: `pagedlab labs build --format nbgrader` (lab 01,
instructor points), `nbgrader generate_assignment`, three learners' submissions, `nbgrader autograde`,
and the scores read back from nbgrader's gradebook (`nbgrader.api.Gradebook`):

* alice hands in the solutions (the released notebooks with every answer cell filled in) -> full points;
* bob hands in the released notebooks untouched (blank) -> 0;
* carol solved one of the two exercises -> exactly that exercise's points.

nbgrader runs every cell of a notebook, so one light lab keeps this to about a minute on an idle 2-core
machine (lab 01: no model; lab 08's cells serve SmolLM2 through the learner's parts, minutes more); every
lab, the Triton exercise included, goes through the cheaper checks of test_formats.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pagedlab.course import formats
from tests.grading.test_formats import tool_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LABS = ("01_kv_cache_fragmentation",)
POINTS = {"01.kv_bytes_per_token": 3.0, "01.waste_accounting": 2.0}
ASSIGNMENT = "pagedlab"
STUDENTS = ("alice", "bob", "carol")


def _run(args: list[str], cwd: Path, timeout: float = 600) -> str:
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=tool_env(), check=False)
    assert r.returncode == 0, f"{args[:3]} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return r.stdout + r.stderr


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _submit(course: Path, student: str, answers: dict[str, dict[str, str]]) -> None:
    """submitted/<student>/pagedlab/: the released notebooks with ``answers[lab][grade_id]`` as those
    answer cells' sources (what a learner who wrote that code saves)."""
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    for lab in LABS:
        nb = json.loads((course / "release" / ASSIGNMENT / f"{lab}.ipynb").read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            gid = _meta(cell).get("grade_id")
            if gid in answers.get(lab, {}):
                cell["source"] = answers[lab][gid]
        (folder / f"{lab}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


def test_nbgrader_autograde_scores_solutions_blank_and_partial(tmp_path):
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.Execute.timeout = 600  # a cell that imports torch on a busy machine takes more than 30 s\n"
    )
    points = ",".join(f"{k}={v:g}" for k, v in POINTS.items())
    _run(
        [str(BIN / "pagedlab"), "labs", "build", *LABS, "--format", "nbgrader", "--points", points, "--out"]
        + [str(course / "source" / ASSIGNMENT)],
        REPO,
    )
    _run([str(BIN / "nbgrader"), "generate_assignment", ASSIGNMENT], course)

    source = {
        lab: {
            _meta(c)["grade_id"]: "".join(c["source"])
            for c in json.loads((course / "source" / ASSIGNMENT / f"{lab}.ipynb").read_text())["cells"]
            if _meta(c).get("solution")
        }
        for lab in LABS
    }
    _submit(course, "alice", source)
    _submit(course, "bob", {})
    kv = formats.grade_id("01.kv_bytes_per_token")
    _submit(course, "carol", {LABS[0]: {kv: source[LABS[0]][kv]}})

    for student in STUDENTS:  # one run each: every command stays well inside its time limit
        _run([str(BIN / "nbgrader"), "autograde", ASSIGNMENT, "--student", student], course)

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:

        def score(student: str, eid: str) -> tuple[float, float]:
            g = gb.find_grade(formats.grade_id(eid) + "_test", _lab_of(eid), ASSIGNMENT, student)
            return g.score, g.max_score

        got = {s: {eid: score(s, eid) for eid in POINTS} for s in STUDENTS}
        totals = {s: gb.find_submission(ASSIGNMENT, s).score for s in STUDENTS}
    print("nbgrader autograde scores:", json.dumps(got), "totals:", totals)
    assert got["alice"] == {eid: (p, p) for eid, p in POINTS.items()}
    assert got["bob"] == {eid: (0.0, p) for eid, p in POINTS.items()}
    assert got["carol"] == {eid: (p if eid == "01.kv_bytes_per_token" else 0.0, p) for eid, p in POINTS.items()}
    assert totals == {"alice": sum(POINTS.values()), "bob": 0.0, "carol": 3.0}


def _lab_of(eid: str) -> str:
    return next(lab for lab in LABS if lab.startswith(eid.split(".")[0] + "_"))
