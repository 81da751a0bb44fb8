"""One scoring rule (``--scoring all-or-nothing|partial``, default all-or-nothing) on every route: the same
wrong submission - one exercise that passes some of its tests and fails others - scores the same through
``pagedlab grade``'s scoring (``_score_exercise``), Gradescope's ``results.json`` rows, the nbgrader test cell
(graded by nbgrader 0.9.6's own ``determine_grade``) and the otter question (graded by otter-grader 7.0.0's
own ``OKTestFile``: its doctest runner, point split and ``all_or_nothing``). The real tools' full runs are in
test_nbgrader_route.py / test_otter_route.py; ``pagedlab grade --scoring partial`` end to end in
test_grade_points.py."""

from __future__ import annotations

import argparse
import ast
import json
import zipfile

import nbformat
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from pagedlab.course import formats
from pagedlab.course.labs_build import LabsBuildError
from pagedlab.grading import check, gradescope, registry, report
from pagedlab.grading import grade as grade_module
from pagedlab.grading.grade import E2EOptions, ExerciseResult, GradeError, _score_exercise
from pagedlab.grading.points import (
    DEFAULT_SCORING,
    SCORING,
    PointsError,
    add_scoring_argument,
    exercise_score,
    parse_scoring,
)
from pagedlab.grading.runner import run_driver
from tests.grading.helpers import WRONG_VERSIONS_DIR, _parse_wrong_version
from tests.grading.test_formats import _solution, _src

EID, LAB, POINTS = "02.slot_mapping", "02_block_pool", 4.0
# passes the first test, fails the second ("follow the block table") and some after it
WRONG = _parse_wrong_version(EID, WRONG_VERSIONS_DIR / EID / "block_index_off_by_one.py").source


@given(max_score=st.floats(0, 1000, allow_nan=False), earned=st.lists(st.booleans(), max_size=12))
def test_exercise_score_against_the_rule(max_score, earned):
    n, k = len(earned), sum(earned)
    partial = exercise_score(max_score, earned, "partial")
    whole = exercise_score(max_score, earned, "all-or-nothing")
    assert partial == pytest.approx(max_score * k / n if n else 0.0, abs=1e-4)
    assert whole == (round(max_score, 4) if n and k == n else 0.0)
    assert exercise_score(max_score, earned) == whole  # the default


def test_the_default_is_all_or_nothing_everywhere():
    assert DEFAULT_SCORING == "all-or-nothing" and set(SCORING) == {"all-or-nothing", "partial"}
    parser = argparse.ArgumentParser()
    add_scoring_argument(parser)
    assert parser.parse_args([]).scoring == DEFAULT_SCORING
    assert parse_scoring(None) == DEFAULT_SCORING
    with pytest.raises(PointsError, match="--scoring 'some'"):
        parse_scoring("some")
    with pytest.raises(PointsError, match="--scoring 'some'"):
        exercise_score(1.0, [True], "some")


@pytest.fixture(scope="module")
def wrong_object():
    return registry.snippet_object(EID, WRONG)


@pytest.fixture
def public_only(monkeypatch):
    """The exercise with its public tests only (a hidden-tests folder another test loaded left out):
    nbgrader and otter run those."""
    ex = registry.get(EID)
    monkeypatch.setattr(ex, "tests", [t for t in ex.tests if not t.hidden])
    return ex


def _grade_route(ex, obj, scoring: str) -> tuple[float, float]:
    """(``pagedlab grade``'s exercise score, the sum of its Gradescope rows' scores)."""
    transcripts = {(EID, t.title, t.hidden): run_driver(t, obj, plain=True) for t in ex.tests}
    er = ExerciseResult(EID, found=True, max_score=POINTS)
    _score_exercise(er, transcripts, True, scoring)
    rows = report._exercise_tests(EID, er)
    assert sum(r["max_score"] for r in rows) == pytest.approx(POINTS)
    assert [r["status"] for r in rows] == ["passed" if o.passed else "failed" for o in er.outcomes]
    return er.score, round(sum(r["score"] for r in rows), 4)


def _run_cell(source: str, env: dict) -> dict:
    """The output a kernel gives a cell: its error, or its last expression's value (``execute_result``)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    assert last is None or isinstance(last, ast.Expr)
    try:
        exec(compile(tree, "<cell>", "exec"), env)
        if last is None:
            return {}
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), env)
    except Exception as e:  # noqa: BLE001 - the kernel's view of any error
        return {"output_type": "error", "ename": type(e).__name__, "evalue": str(e), "traceback": []}
    return {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/plain": repr(value)}}


def _nbgrader_route(obj, scoring: str) -> float:
    from nbgrader.utils import determine_grade

    nb = formats.nbgrader_source(_solution(LAB), LAB, points={EID: POINTS}, scoring=scoring)
    cell = next(
        c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == f"ex{EID}_test".replace(".", "_")
    )
    output = _run_cell(_src(cell), {registry.get(EID).name: obj})
    node = nbformat.from_dict(dict(cell, outputs=[output] if output else []))
    score, max_points = determine_grade(node)
    assert max_points == POINTS
    return float(score)


def _otter_route(obj, scoring: str) -> float:
    from otter.assign.utils import str_to_doctest
    from otter.test_files.abstract_test import TestCase
    from otter.test_files.ok_test import OKTestFile

    cells = formats.otter_source(_solution(LAB), LAB, points={EID: POINTS}, scoring=scoring)["cells"]
    gid = formats.grade_id(EID)
    q = next(i for i, c in enumerate(cells) if _src(c).startswith(f"# BEGIN QUESTION\nname: {gid}\n"))
    config = yaml.safe_load(_src(cells[q]).split("\n", 1)[1])
    end = next(i for i in range(q, len(cells)) if _src(cells[i]) == "# END TESTS")
    tests = [_src(c) for c in cells[q:end] if c["cell_type"] == "code" and "_result = check(" in _src(c)]
    cases = [  # as otter assign writes them (ok_format): each test cell as a doctest
        TestCase(f"{gid} - {i}", "\n".join(str_to_doctest(t.split("\n"), [])), False, None, None, None)
        for i, t in enumerate(tests)
    ]
    cases = OKTestFile.resolve_test_file_points(config["points"], cases)
    tf = OKTestFile(gid, "", cases, all_or_nothing=bool(config.get("all_or_nothing", False)))
    tf.run({registry.get(EID).name: obj})
    assert tf.possible == pytest.approx(POINTS)
    return float(tf.score)


@pytest.mark.parametrize("scoring", SCORING)
def test_one_wrong_answer_scores_the_same_on_every_route(scoring, wrong_object, public_only):
    grade_score, gradescope_score = _grade_route(public_only, wrong_object, scoring)
    scores = {
        "grade": grade_score,
        "gradescope": gradescope_score,
        "nbgrader": _nbgrader_route(wrong_object, scoring),
        "otter": _otter_route(wrong_object, scoring),
    }
    passed = [o.passed for o in check(wrong_object, EID, show=False).outcomes]
    assert 0 < sum(passed) < len(passed), "the wrong version should pass some tests and fail others"
    expected = 0.0 if scoring == "all-or-nothing" else POINTS * sum(passed) / len(passed)
    assert scores == {route: pytest.approx(expected, abs=1e-4) for route in scores}


@pytest.mark.parametrize("scoring", SCORING)
def test_a_right_answer_earns_its_points_on_every_route(scoring, public_only):
    obj = registry.snippet_object(EID)
    scores = [*_grade_route(public_only, obj, scoring), _nbgrader_route(obj, scoring), _otter_route(obj, scoring)]
    assert scores == [pytest.approx(POINTS)] * 4


def test_the_rule_reaches_the_gradescope_run_and_bad_values_are_refused(tmp_path, monkeypatch):
    """``gradescope-bundle --scoring`` is in the zip's config (default all-or-nothing), and the Gradescope run
    passes it to grade(); an unknown rule is refused by every entry point, naming it."""
    off = E2EOptions(enabled=False)
    for given_rule, stored in ((None, "all-or-nothing"), ("partial", "partial")):
        zp = gradescope.build_bundle(tmp_path / "a.zip", exercises=[EID], e2e=off, scoring=given_rule)
        with zipfile.ZipFile(zp) as zf:
            assert json.loads(zf.read(gradescope.CONFIG_NAME))["scoring"] == stored
    seen = {}

    class Seen(Exception):
        pass

    def fake_grade(*args, **kwargs):
        seen.update(kwargs)
        raise Seen

    monkeypatch.setattr(grade_module, "grade", fake_grade)
    (tmp_path / "submission").mkdir()
    for config, rule in (({}, "all-or-nothing"), ({"scoring": "partial"}, "partial")):
        with pytest.raises(Seen):
            gradescope._grade_submission(tmp_path, {**config, "e2e": {"enabled": False}}, [EID])
        assert seen["scoring"] == rule
    with pytest.raises(gradescope.BundleError, match="--scoring 'half'"):
        gradescope.build_bundle(tmp_path / "b.zip", exercises=[EID], e2e=off, scoring="half")
    monkeypatch.undo()
    with pytest.raises(GradeError, match="--scoring 'half'"):
        grade_module.grade([str(tmp_path)], tmp_path / "out", scoring="half", quiet=True)
    with pytest.raises(LabsBuildError, match="--scoring 'half'"):
        formats.generator("nbgrader", scoring="half")
