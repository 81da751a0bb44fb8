"""`pagedlab labs build --format nbgrader|otter` on every lab: the notebooks pass nbgrader's own metadata
validator and `nbgrader generate_assignment`, `otter assign` accepts them, and each exercise's test cell
fails the blank (released) exercise and passes the solution. The real tools' autograding of two labs is
in test_nbgrader_route.py / test_otter_route.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from pagedlab.course import formats
from pagedlab.course.labs_build import LabsBuildError
from pagedlab.grading import registry
from pagedlab.grading.points import PointsError, parse_points

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((REPO / "solutions").glob("[0-9][0-9]_*.ipynb"))
BIN = Path(sys.executable).parent
EXERCISES = [ex.id for ex in registry.all_exercises()]


def tool_env() -> dict[str, str]:
    """The environment of an activated venv: nbgrader runs `alembic` from PATH."""
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", OMP_WAIT_POLICY="PASSIVE")


def _solution(stem: str) -> dict:
    return json.loads((REPO / "solutions" / f"{stem}.ipynb").read_text(encoding="utf-8"))


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def _lab_of(eid: str) -> str:
    return next(p.stem for p in SOLUTIONS if p.stem.startswith(eid.split(".")[0] + "_"))


def _pagedlab(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "pagedlab"), *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


# --------------------------------------------------------------------------------- nbgrader
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_nbgrader_metadata_per_exercise(path):
    """One autograded answer cell and, after it, one locked autograded test cell per exercise, with the
    exercise's points; nbgrader's own schema-3 validator accepts the notebook."""
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

    points = {"02.free_queue": 3.0} if path.stem.startswith("02") else {}
    nb = formats.nbgrader_source(_solution(path.stem), path.stem, points=points)
    node = nbformat.from_dict(nb)
    nbformat.validate(node)
    MetadataValidatorV3().validate_nb(node)
    wanted = sorted(e for e in EXERCISES if e.startswith(path.stem[:2] + "."))
    answers = {c["metadata"]["nbgrader"]["grade_id"]: i for i, c in enumerate(nb["cells"]) if _meta(c).get("solution")}
    tests = {c["metadata"]["nbgrader"]["grade_id"]: i for i, c in enumerate(nb["cells"]) if _meta(c).get("grade")}
    assert sorted(answers) == sorted(formats.grade_id(e) for e in wanted)
    assert sorted(tests) == sorted(formats.grade_id(e) + "_test" for e in wanted)
    for eid in wanted:
        gid = formats.grade_id(eid)
        answer, test = nb["cells"][answers[gid]], nb["cells"][tests[gid + "_test"]]
        assert answers[gid] < tests[gid + "_test"]
        assert _meta(answer) == {
            "grade": False,
            "solution": True,
            "locked": False,
            "grade_id": gid,
            "schema_version": 3,
        }
        assert _meta(test)["locked"] is True and _meta(test)["solution"] is False
        assert _meta(test)["points"] == points.get(eid, 1.0)
        assert f"check({registry.get(eid).name}, {eid!r})" in _src(test) and "assert _result.passed" in _src(test)
    # the learner-facing check(...) cells became the test cells: none is left over
    assert not [c for c in nb["cells"] if _src(c).startswith("check(")]
    assert all(c.get("outputs", []) == [] for c in nb["cells"])


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


@pytest.fixture(scope="module")
def nbgrader_release(tmp_path_factory):
    """Every lab through `pagedlab labs build --format nbgrader` and the real `nbgrader generate_assignment`."""
    course = tmp_path_factory.mktemp("course")
    (course / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n")
    r = _pagedlab("labs", "build", "--format", "nbgrader", "--out", str(course / "source" / "pagedlab"))
    assert r.returncode == 0, r.stdout + r.stderr
    g = subprocess.run(
        [str(BIN / "nbgrader"), "generate_assignment", "pagedlab"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=tool_env(),
    )
    assert g.returncode == 0, g.stdout + g.stderr
    return course


def test_generate_assignment_accepts_every_lab(nbgrader_release):
    released = sorted(p.name for p in (nbgrader_release / "release" / "pagedlab").glob("*.ipynb"))
    assert released == [p.name for p in SOLUTIONS]
    for eid in EXERCISES:
        cell = _released_cell(nbgrader_release, eid)
        assert "raise NotImplementedError()" in _src(cell) and "BEGIN SOLUTION" not in _src(cell)
        solution_body = registry.snippet_source(eid).split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        assert solution_body.strip() not in _src(cell)


def _released_cell(course: Path, eid: str, test: bool = False) -> dict:
    nb = json.loads((course / "release" / "pagedlab" / f"{_lab_of(eid)}.ipynb").read_text(encoding="utf-8"))
    gid = formats.grade_id(eid) + ("_test" if test else "")
    return next(c for c in nb["cells"] if _meta(c).get("grade_id") == gid)


@pytest.mark.parametrize("eid", EXERCISES)
def test_nbgrader_test_cell_fails_blank_passes_solution(nbgrader_release, eid):
    """The released test cell, run after the released (blank) exercise cell, raises AssertionError (so
    nbgrader gives 0); after the solution cell it runs through (full points)."""
    _blank_fails_solution_passes(
        eid, _src(_released_cell(nbgrader_release, eid)), _src(_released_cell(nbgrader_release, eid, test=True))
    )


def _blank_fails_solution_passes(eid: str, blank_cell: str, test: str, passed: str = "0") -> None:
    """``test`` (a test cell's source) raises AssertionError after ``blank_cell`` (``passed`` of its tests
    passing: a regex) and passes after the solution."""
    name = registry.get(eid).name
    blank = {name: registry.snippet_object(eid, blank_cell)}
    with pytest.raises(AssertionError, match=rf"exercise {eid}: {passed} of \d+ tests passed"):
        exec(compile(test, f"<test {eid}>", "exec"), blank)
    solved = {name: registry.snippet_object(eid)}
    exec(compile(test, f"<test {eid}>", "exec"), solved)
    assert solved["_result"].passed


def test_nbgrader_format_needs_out_and_knows_exercises(tmp_path):
    r = _pagedlab("labs", "build", "--format", "nbgrader")
    assert r.returncode == 1 and "--format nbgrader needs --out DIR" in r.stderr
    r = _pagedlab("labs", "build", "--format", "nbgrader", "--out", str(tmp_path), "--points", "99.nope=1")
    assert r.returncode == 1 and "'99.nope' is not an exercise of this course" in r.stderr
    nb = _solution("02_block_pool")
    k = next(i for i, c in enumerate(nb["cells"]) if _src(c).startswith("# EXERCISE"))  # the lab's first exercise
    nb["cells"][k]["source"] = ["# EXERCISE 02.not_an_exercise\n", "x = 1\n"]
    with pytest.raises(LabsBuildError, match="02.not_an_exercise"):
        formats.nbgrader_source(nb, "02_block_pool")


def test_a_missing_check_cell_gets_a_test_cell_after_the_exercise():
    nb = _solution("02_block_pool")
    nb["cells"] = [c for c in nb["cells"] if not _src(c).startswith("check(slot_mapping)")]
    out = formats.nbgrader_source(nb, "02_block_pool")
    ids = [_meta(c).get("grade_id") for c in out["cells"]]
    i = ids.index("ex02_slot_mapping")
    assert ids[i + 1] == "ex02_slot_mapping_test"


# --------------------------------------------------------------------------------- points
def test_parse_points(tmp_path):
    f = tmp_path / "points.toml"
    f.write_text('[points]\n"02.free_queue" = 3\n"02.slot_mapping" = 0.5\n')
    assert parse_points([str(f), "02.free_queue=4,03.fork=2"]) == {
        "02.free_queue": 4.0,
        "02.slot_mapping": 0.5,
        "03.fork": 2.0,
    }
    assert parse_points(None) == {}
    for bad, why in (
        ("02.free_queue=-1", "finite number >= 0"),
        ("02.free_queue=inf", "finite number >= 0"),
        ("02.free_queue=three", "must be a number"),
        ("=3,x", "expected ID=P"),
        (str(tmp_path / "missing.toml"), "cannot read it"),
    ):
        with pytest.raises(PointsError, match=why):
            parse_points([bad])
    f.write_text("not toml [")
    with pytest.raises(PointsError, match="not a TOML file"):
        parse_points([str(f)])


# --------------------------------------------------------------------------------- otter
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_otter_master_blocks(path):
    nb = formats.otter_source(_solution(path.stem), path.stem, points={"01.waste_accounting": 2})
    nbformat.validate(nbformat.from_dict(nb))
    first = nb["cells"][0]
    assert first["cell_type"] == "raw" and _src(first).startswith("# ASSIGNMENT CONFIG")
    wanted = sorted(e for e in EXERCISES if e.startswith(path.stem[:2] + "."))
    raws = [_src(c) for c in nb["cells"] if c["cell_type"] == "raw"]
    assert sorted(r.split("name: ")[1].split("\n")[0] for r in raws if r.startswith("# BEGIN QUESTION")) == sorted(
        formats.grade_id(e) for e in wanted
    )
    for eid in wanted:
        q = next(r for r in raws if r.startswith(f"# BEGIN QUESTION\nname: {formats.grade_id(eid)}\n"))
        assert q.endswith(f"points: {2 if eid == '01.waste_accounting' else 1}\nall_or_nothing: true")
    solution_cells = [c for c in nb["cells"] if "BEGIN SOLUTION\n" in _src(c) or "# BEGIN SOLUTION" in _src(c)]
    assert all("### BEGIN SOLUTION" not in _src(c) for c in nb["cells"])
    assert len([c for c in solution_cells if c["cell_type"] == "code"]) == len(wanted)


@pytest.mark.parametrize("eid", EXERCISES)
def test_otter_test_cell_fails_blank_passes_solution(eid):
    """The question's test cell raises AssertionError after otter's own stub of the exercise cell (otter's
    ``replace_solutions``, what ``otter assign`` writes into the student notebook) and passes after the
    solution."""
    from otter.assign.solutions import replace_solutions

    lab = _lab_of(eid)
    cells = formats.otter_source(_solution(lab), lab)["cells"]
    gid = formats.grade_id(eid)
    q = next(i for i, c in enumerate(cells) if _src(c).startswith(f"# BEGIN QUESTION\nname: {gid}\n"))
    assert [_src(c) for c in cells[q + 1 : q + 8] if c["cell_type"] == "raw"] == [
        "# BEGIN SOLUTION",
        "# END SOLUTION",
        "# BEGIN TESTS",
        "# END TESTS",
        "# END QUESTION",
    ]
    solution, test = _src(cells[q + 2]), _src(cells[q + 5])
    expected = registry.snippet_source(eid).replace("### BEGIN", "# BEGIN").replace("### END", "# END")
    assert solution.rstrip() == expected.rstrip()
    blank = "\n".join(replace_solutions(solution.split("\n"), "python"))
    assert "BEGIN SOLUTION" not in blank and "    ..." in blank
    # otter's stub is `...`: a method returning None can pass a test or two (02.free_queue: 1 of 8), not all
    _blank_fails_solution_passes(eid, blank, test, passed=r"\d+")
