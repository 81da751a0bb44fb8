"""Every submission keeps its identity (issue 22, item 4): file names exactly as submitted (any script, spaces),
one row per submission, never merged; grades.csv has the submitted path and, when known, the student's id (from
Gradescope's submission_metadata.json, nbgrader's ``submitted/<student_id>/<assignment>/`` folders, or
``--roster``)."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import pytest

from pagedlab.grading import registry
from pagedlab.grading.grade import (
    E2EOptions,
    GradeError,
    LearnerResult,
    add_arguments,
    apply_roster,
    discover,
    grade,
    read_roster,
)
from tests.grading.helpers import stub_source, variant, write_notebook

SLOT = variant("02.slot_mapping", ("pos", "position"))  # correct, and not the kit's code
OFF = {"exercises": ["02.slot_mapping"], "quiet": True, "e2e": E2EOptions(enabled=False)}


def _rows(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "grades.csv").read_text(encoding="utf-8").splitlines()))


def test_names_are_kept_exactly_and_never_merged(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    write_notebook(subs / "honest.ipynb", [SLOT])
    write_notebook(subs / "honest .ipynb", [stub_source("02.slot_mapping")])  # a space: another learner
    write_notebook(subs / "李雷.ipynb", [SLOT])
    write_notebook(subs / "韩梅.ipynb", [stub_source("02.slot_mapping")])
    results = grade([subs], tmp_path / "out", **OFF)
    names = {r.learner.name: r for r in results}
    assert sorted(names) == sorted(["honest", "honest ", "李雷", "韩梅"])
    assert names["honest"].score == 1 and names["honest "].score == 0
    assert names["李雷"].score == 1 and names["韩梅"].score == 0
    rows = _rows(tmp_path / "out")
    assert len(rows) == 4
    by = {r["learner"]: r for r in rows}
    assert by["honest "]["file"] == str(subs / "honest .ipynb") and by["honest"]["file"] == str(subs / "honest.ipynb")
    assert by["honest"]["score"] == "1" and by["honest "]["score"] == "0" and by["李雷"]["score"] == "1"
    for name in names:  # one feedback page and one results.json each
        assert (tmp_path / "out" / "feedback" / f"{name}.html").is_file()
        assert (tmp_path / "out" / "gradescope" / name / "results.json").is_file()
    combined = json.loads((tmp_path / "out" / "all_learners.json").read_text(encoding="utf-8"))
    assert sorted(combined["learners"]) == sorted(names)


def test_a_third_namesake_does_not_take_a_real_learners_name(tmp_path: Path) -> None:
    for folder in ("a", "b", "c"):
        write_notebook(tmp_path / folder / "lab.ipynb", [SLOT])
    write_notebook(tmp_path / "d" / "lab-2.ipynb", [SLOT])
    learners = discover([tmp_path / "d" / "lab-2.ipynb", *(tmp_path / f / "lab.ipynb" for f in "abc")])
    assert [lr.name for lr in learners] == ["lab-2", "lab", "lab-3", "lab-4"]


def test_nbgrader_submitted_folders_give_student_ids(tmp_path: Path) -> None:
    submitted = tmp_path / "course" / "submitted"
    for sid, nb in (("s-001", [SLOT]), ("s-002", [stub_source("02.slot_mapping")])):
        write_notebook(submitted / sid / "lab02" / "02_block_pool.ipynb", nb)
        (submitted / sid / "lab02" / "timestamp.txt").write_text("2026-12-01 10:00:00")
    write_notebook(submitted / "s-001" / "lab03" / "03_copy_on_write.ipynb", [SLOT])
    results = grade([submitted], tmp_path / "out", **OFF)
    got = [(r.learner.student_id, Path(r.learner.source).name, r.score, r.messages) for r in results]
    assert got == [("s-001", "lab02", 1.0, []), ("s-001", "lab03", 1.0, []), ("s-002", "lab02", 0.0, [])], got
    rows = _rows(tmp_path / "out")
    assert [(r["student_id"], r["file"]) for r in rows] == [
        ("s-001", str(submitted / "s-001" / "lab02")),
        ("s-001", str(submitted / "s-001" / "lab03")),
        ("s-002", str(submitted / "s-002" / "lab02")),
    ]


def test_a_roster_gives_student_ids_by_file_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    subs = tmp_path / "subs"
    write_notebook(subs / "李雷.ipynb", [SLOT])
    write_notebook(subs / "honest .ipynb", [SLOT])
    roster = tmp_path / "roster.csv"
    roster.write_text("file,student_id,name\n李雷.ipynb,20261,Li Lei\nhonest .ipynb,20262,H\ngone.ipynb,20263,G\n")
    grade([subs], tmp_path / "out", roster=roster, **(OFF | {"quiet": False}))
    assert {r["learner"]: r["student_id"] for r in _rows(tmp_path / "out")} == {"李雷": "20261", "honest ": "20262"}
    assert "warning: --roster: no submission 'gone.ipynb' (student 20263)" in capsys.readouterr().out
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["subs", "--roster", "r.csv"]).roster == "r.csv"


@pytest.mark.parametrize(
    "text,error",
    [
        ("name,id\na.ipynb,1\n", "needs a header row with the columns 'file' and 'student_id'"),
        ("file,student_id\na.ipynb,\n", "line 2: an empty 'file' or 'student_id'"),
        ("file,student_id\na.ipynb,1\na.ipynb,2\n", "line 3: 'a.ipynb' is listed twice"),
    ],
)
def test_a_bad_roster_is_refused_before_grading(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "r.csv").write_text(text)
    with pytest.raises(GradeError, match=error.replace("(", r"\(").replace(")", r"\)")):
        read_roster(tmp_path / "r.csv")
    with pytest.raises(GradeError, match="cannot be read"):
        read_roster(tmp_path / "missing.csv")


def test_the_roster_matches_the_path_as_given_before_the_name(tmp_path: Path) -> None:
    learners = discover([tmp_path / "x" / "lab.ipynb", tmp_path / "y" / "lab.ipynb"])
    warnings = apply_roster(learners, {str(tmp_path / "y" / "lab.ipynb"): "Y", "lab.ipynb": "X"})
    assert [lr.student_id for lr in learners] == ["X", "Y"] and warnings == []


def test_gradescope_takes_the_student_id_from_submission_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pagedlab.grading import grade as grade_module
    from pagedlab.grading.gradescope import CONFIG_NAME, run

    seen: list[Any] = []

    def fake_grade(learners: Any, out: Any, hidden: Any, **kw: Any) -> Any:
        seen.append(learners[0].student_id)
        return [LearnerResult(learners[0])]  # graded: nothing found (the id is what is looked at)

    monkeypatch.setattr(grade_module, "grade", fake_grade)
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / CONFIG_NAME).write_text(json.dumps({"exercises": ["02.slot_mapping"]}))
    write_notebook(root / "submission" / "lab.ipynb", [SLOT])
    meta = {"users": [{"email": "a@x.org", "id": 1234, "name": "A"}, {"email": "b@x.org", "id": 5678, "name": "B"}]}
    (root / "submission_metadata.json").write_text(json.dumps(meta))
    written = json.loads(run(root).read_text(encoding="utf-8"))
    assert written["extra_data"]["student_id"] == "1234 5678", written["extra_data"]  # reaches results.json
    assert "no student id" not in capsys.readouterr().err
    (root / "submission_metadata.json").write_text("{not json")
    run(root)
    assert seen == ["1234 5678", ""]
    err = capsys.readouterr().err  # said, not silently dropped (Gradescope shows stderr to the instructor)
    assert "no student id from" in err and "submission_metadata.json (JSONDecodeError" in err, err
    assert registry.get("02.slot_mapping").points == 1
