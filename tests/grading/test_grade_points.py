"""`pagedlab grade --points`: the instructor's per-exercise points are each exercise's max_score, split
among its tests (``--scoring partial``), in the totals, grades.csv and Gradescope's results.json."""

from __future__ import annotations

import argparse
import csv
import json

import pytest

from pagedlab.grading import registry
from pagedlab.grading.grade import add_arguments, main
from tests.grading.helpers import WRONG_VERSIONS_DIR, _parse_wrong_version, write_notebook

SLOT = registry.snippet_source("02.slot_mapping")
QUEUE = registry.snippet_source("02.free_queue")
# first fails at the second test ("follow the block table"): passes some tests, fails others
WRONG_SLOT = _parse_wrong_version(
    "02.slot_mapping", WRONG_VERSIONS_DIR / "02.slot_mapping" / "block_index_off_by_one.py"
).source


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("points")
    subs = root / "submissions"
    write_notebook(subs / "alice.ipynb", [QUEUE, SLOT])
    write_notebook(subs / "bob.ipynb", [QUEUE, WRONG_SLOT])
    (root / "points.toml").write_text('[points]\n"02.slot_mapping" = 4\n"02.free_queue" = 1\n')
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [str(subs), "--out", str(root / "out"), "--no-e2e", "--exercises", "02.free_queue", "02.slot_mapping"]
        + ["--points", str(root / "points.toml"), "--points", "02.free_queue=2.5", "--scoring", "partial"]
    )
    assert main(args) == 0
    with open(root / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {r["learner"]: r for r in csv.DictReader(f)}
    return root / "out", rows


def test_points_are_the_max_scores(graded):
    out, rows = graded
    assert rows["alice"]["score"] == "6.5" and rows["alice"]["max_score"] == "6.5"
    assert rows["alice"]["02.slot_mapping"] == "4" and rows["alice"]["02.free_queue"] == "2.5"
    results = json.loads((out / "gradescope" / "alice" / "results.json").read_text())
    assert results["score"] == pytest.approx(6.5)
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(6.5)


def test_a_partly_right_exercise_gets_its_share_of_the_instructors_points(graded):
    out, rows = graded
    results = json.loads((out / "gradescope" / "bob" / "results.json").read_text())
    slot_tests = [t for t in results["tests"] if "02.slot_mapping" in t["name"]]
    n, passed = len(slot_tests), sum(t["score"] == t["max_score"] for t in slot_tests)
    assert 0 < passed < n, "the wrong version should pass some of the tests and fail others"
    assert sum(t["max_score"] for t in slot_tests) == pytest.approx(4.0)
    assert float(rows["bob"]["02.slot_mapping"]) == pytest.approx(4.0 * passed / n, abs=1e-3)
    assert float(rows["bob"]["max_score"]) == 6.5
