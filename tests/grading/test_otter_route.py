"""The otter route, run through the real otter-grader: `pagedlab labs build --format otter` (lab 01,
instructor points), `otter assign` (student notebook + autograder zip), then `otter run` with that zip on

* the autograder notebook (the solutions) -> full points per question;
* the student notebook with one exercise written (the other left as otter's `...` stub) -> that
  exercise's points only.

Each `otter run` executes the whole notebook (about 30 s on an idle 2-core machine); the blank case of
every exercise is checked without executing notebooks in test_formats.py."""

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
LAB = "01_kv_cache_fragmentation"
POINTS = {"01.kv_bytes_per_token": 3.0, "01.waste_accounting": 2.0}


def _run(args: list[str], cwd: Path) -> str:
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, env=tool_env(), check=False)
    assert r.returncode == 0, f"{args[:3]} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return r.stdout + r.stderr


def _scores(tmp: Path, zip_path: Path, notebook: Path, name: str) -> dict[str, tuple[float, float]]:
    out = tmp / f"out-{name}"
    out.mkdir()
    _run([str(BIN / "otter"), "run", "--no-logo", "-a", str(zip_path), "-o", str(out), str(notebook)], tmp)
    results = json.loads((out / "results.json").read_text())
    return {t["name"]: (t["score"], t["max_score"]) for t in results["tests"] if "max_score" in t}


def test_otter_assign_and_run_score_solutions_and_partial(tmp_path):
    points = ",".join(f"{k}={v:g}" for k, v in POINTS.items())
    src = tmp_path / "src"
    _run(
        [str(BIN / "pagedlab"), "labs", "build", LAB, "--format", "otter", "--points", points, "--out", str(src)], REPO
    )
    _run([str(BIN / "otter"), "assign", str(src / f"{LAB}.ipynb"), str(tmp_path / "dist")], tmp_path)
    (zip_path,) = (tmp_path / "dist" / "autograder").glob("*.zip")

    student = json.loads((tmp_path / "dist" / "student" / f"{LAB}.ipynb").read_text())
    master = json.loads((src / f"{LAB}.ipynb").read_text())
    kv_solution = next(  # the marker lines are comments: the learner's cell may keep them
        "".join(c["source"])
        for c in master["cells"]
        if "".join(c["source"]).startswith("# EXERCISE 01.kv_bytes_per_token")
    )
    cell = next(c for c in student["cells"] if "".join(c["source"]).startswith("# EXERCISE 01.kv_bytes_per_token"))
    cell["source"] = kv_solution
    partial = tmp_path / "partial" / f"{LAB}.ipynb"
    partial.parent.mkdir()
    partial.write_text(json.dumps(student))

    full = _scores(tmp_path, zip_path, tmp_path / "dist" / "autograder" / f"{LAB}.ipynb", "solutions")
    part = _scores(tmp_path, zip_path, partial, "partial")
    print("otter run scores: solutions", full, "partial", part)
    assert full == {formats.grade_id(e): (p, p) for e, p in POINTS.items()}
    assert part == {
        formats.grade_id("01.kv_bytes_per_token"): (3.0, 3.0),
        formats.grade_id("01.waste_accounting"): (0.0, 2.0),
    }
