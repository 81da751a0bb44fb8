"""``pagedlab labs build --format nbgrader|otter``: the solution notebooks as a source assignment of
nbgrader or otter-grader, for a course that already grades with one of them.

**nbgrader** (``nbgrader generate_assignment``, tested with nbgrader 0.9.6): each notebook is its
solution with outputs stripped and nbgrader's cell metadata (schema 3) added:

* every exercise cell (``# EXERCISE <id>``, or any code cell with a ``### BEGIN SOLUTION`` region)
  is an *autograded answer* cell: ``{solution: true, grade: false, locked: false, grade_id}``;
  nbgrader replaces its ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` regions by its own stub;
* the exercise's ``check(<name>)`` cell (the next code cell calling ``check`` on the exercise's name;
  inserted after the exercise cell if there is none) becomes an *autograded test* cell,
  ``{grade: true, solution: false, locked: true, points}``, that shows the same report and then
  ``assert``\\ s ``check(...).passed``: nbgrader gives the cell's points when it runs without an
  error, so a blank or wrong exercise scores 0 and a right one its points (``--scoring
  all-or-nothing``, the default). With ``--scoring partial`` the cell asserts nothing and ends with
  the points earned, ``points * passed / tests``, as its value: nbgrader 0.9.6's ``determine_grade``
  takes a test cell's numeric ``execute_result`` as its partial grade.

**otter** (``otter assign``, tested with otter-grader 7.0.0): a ``# ASSIGNMENT CONFIG`` raw cell
first, and per exercise a question (raw ``# BEGIN QUESTION`` with its name and points,
``# BEGIN SOLUTION`` around the exercise cell, whose ``### BEGIN/END SOLUTION`` lines become otter's
``# BEGIN/END SOLUTION``, ``# BEGIN TESTS`` around one test cell
``assert check(<name>, "<id>", show=False).passed``, ``# END QUESTION``); the question says
``all_or_nothing: true``. With ``--scoring partial`` it has one test cell per test of the exercise
(``assert`` that test's outcome passed; each cell runs ``check`` again), ``all_or_nothing: false``:
otter splits the question's points evenly across its test cases. The lab's own ``check(...)``
cell stays after the question, so learners keep the kit's report; otter's ``grader.check`` runs the
same test.

The grade ids / question names are ``ex`` + the exercise id with ``.`` as ``_`` (``ex02_free_queue``;
the nbgrader test cell adds ``_test``). Cells tagged ``hidden-tests`` or ``solution-only`` are left
out, as in ``labs/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pagedlab.course.labs_build import (
    BEGIN_SOLUTION,
    DROP_TAGS,
    END_SOLUTION,
    KEEP_CELL_METADATA,
    LabsBuildError,
    fingerprint,
    generate_lab,
)
from pagedlab.grading import registry
from pagedlab.grading.extract import cell_source, marker_id
from pagedlab.grading.points import DEFAULT_SCORING, PointsError, parse_scoring, points_of

__all__ = ["FORMATS", "generator", "grade_id", "nbgrader_source", "otter_source"]

#: ``--format`` values; "labs" is ``pagedlab labs build``'s own learner notebooks.
FORMATS = ("labs", "nbgrader", "otter")
NBGRADER_SCHEMA = 3


def grade_id(exercise_id: str) -> str:
    """nbgrader grade id / otter question name of an exercise: ``02.free_queue`` -> ``ex02_free_queue``."""
    return "ex" + re.sub(r"[^A-Za-z0-9_]", "_", exercise_id)


def _cell(cell_type: str, source: str, metadata: dict[str, Any] | None = None, cid: str = "") -> dict[str, Any]:
    new: dict[str, Any] = {"cell_type": cell_type, "metadata": metadata or {}, "source": source.splitlines(True)}
    if cid:
        new["id"] = cid
    if cell_type == "code":
        new["execution_count"] = None
        new["outputs"] = []
    return new


def _clean(cell: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """The cell without outputs and run metadata (its nbgrader metadata too: this module sets it)."""
    meta = {k: v for k, v in cell.get("metadata", {}).items() if k in KEEP_CELL_METADATA and k != "nbgrader"}
    new = _cell(
        cell.get("cell_type", "code"), cell_source(cell) if source is None else source, meta, cell.get("id", "")
    )
    if "attachments" in cell and new["cell_type"] in ("markdown", "raw"):
        new["attachments"] = cell["attachments"]
    return new


def _exercise_of(cell: dict[str, Any]) -> str | None:
    """The exercise id of an exercise cell (its first non-empty line is ``# EXERCISE <id>``)."""
    return marker_id(cell_source(cell)) if cell.get("cell_type") == "code" else None


def _check_cell_index(cells: list[dict[str, Any]], start: int, name: str) -> int | None:
    """Index of the first code cell after ``start`` that calls ``check(<name>...)``, if it comes before
    the next exercise cell."""
    pattern = re.compile(rf"^\s*check\(\s*{re.escape(name)}\b")
    for j in range(start + 1, len(cells)):
        c = cells[j]
        if _exercise_of(c) is not None:
            return None
        if c.get("cell_type") == "code" and pattern.match(cell_source(c)):
            return j
    return None


def _plan(solution: dict[str, Any], stem: str) -> tuple[list[dict[str, Any]], dict[int, tuple[str, int | None]]]:
    """The cells kept (tagged ones dropped) and, per exercise cell index, ``(exercise id, check cell index)``.

    Raises:
        LabsBuildError: a markdown cell with a solution region (no autograded form in these tools), or
            an exercise id that is not an exercise of this course.
    """

    cells = [c for c in solution.get("cells", []) if not set(c.get("metadata", {}).get("tags", [])) & DROP_TAGS]
    plan: dict[int, tuple[str, int | None]] = {}
    for i, c in enumerate(cells):
        if c.get("cell_type") == "markdown" and BEGIN_SOLUTION in cell_source(c):
            raise LabsBuildError(f"{stem}.ipynb: a markdown cell has a solution region; nbgrader/otter need code cells")
        eid = _exercise_of(c)
        if eid is None:
            continue
        try:
            name = registry.get(eid).name
        except registry.UnknownExerciseError as e:
            raise LabsBuildError(f"{stem}.ipynb: cell '# EXERCISE {eid}': {e}") from e
        plan[i] = (eid, _check_cell_index(cells, i, name))
    return cells, plan


def _finish(solution: dict[str, Any], cells: list[dict[str, Any]], stem: str, source_path: str, fmt: str) -> dict:
    smeta = solution.get("metadata", {})
    meta = {k: smeta[k] for k in ("kernelspec", "language_info") if k in smeta}
    nb = {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": solution.get("nbformat_minor", 5)}
    meta["pagedlab"] = {
        "generated_from": source_path or f"solutions/{stem}.ipynb",
        "generated_sha": fingerprint(nb),
        "note": f"generated by `pagedlab labs build --format {fmt}`; edit solutions/ instead",
    }
    return nb


def _test_lines(eid: str, name: str) -> tuple[str, str]:
    """(the call, the assertion message) shared by the nbgrader and otter test cells."""
    call = f"check({name}, {eid!r}"
    message = f'_result.error or f"exercise {eid}: {{_result.num_passed}} of {{len(_result.outcomes)}} tests passed"'
    return call, message


# --------------------------------------------------------------------------------- nbgrader
def _nbgrader_test_cell(eid: str, points: float, cid: str, scoring: str = DEFAULT_SCORING) -> dict[str, Any]:

    call, message = _test_lines(eid, registry.get(eid).name)
    head = (
        f"# Autograded test of exercise {eid} ({points:g} point(s)); nbgrader restores this cell before grading.\n"
        "from pagedlab.grading import check\n\n"
        f"_result = {call})\n"
    )
    if scoring == "partial":  # the cell's value is its grade (nbgrader's partial credit)
        earned = f"{points!r} * _result.num_passed / len(_result.outcomes) if _result.outcomes else 0.0"
        source = head + f"# points earned: a share per test passed\nmin({points!r}, round({earned}, 6))"
    else:
        source = head + f"assert _result.passed, {message}"
    meta = {
        "grade": True,
        "solution": False,
        "locked": True,
        "points": points,
        "grade_id": grade_id(eid) + "_test",
        "schema_version": NBGRADER_SCHEMA,
    }
    return _cell("code", source, {"nbgrader": meta}, cid)


def nbgrader_source(
    solution: dict[str, Any],
    stem: str,
    source_path: str = "",
    points: Mapping[str, float] | None = None,
    scoring: str = DEFAULT_SCORING,
) -> dict[str, Any]:
    """The nbgrader source notebook of a solution notebook (see the module docstring).

    Raises:
        LabsBuildError: see :func:`_plan`.
    """
    scoring = parse_scoring(scoring)
    cells, plan = _plan(solution, stem)
    checks = {ci: eid for eid, ci in plan.values() if ci is not None}
    out: list[dict[str, Any]] = []
    for i, c in enumerate(cells):
        if i in checks:
            eid = checks[i]
            out.append(_nbgrader_test_cell(eid, points_of(eid, points), c.get("id", ""), scoring))
            continue
        new = _clean(c)
        if i in plan or (c.get("cell_type") == "code" and BEGIN_SOLUTION in cell_source(c)):
            gid = grade_id(plan[i][0]) if i in plan else f"{grade_id(stem)}_cell{i}"
            new["metadata"]["nbgrader"] = {
                "grade": False,
                "solution": True,
                "locked": False,
                "grade_id": gid,
                "schema_version": NBGRADER_SCHEMA,
            }
        out.append(new)
        if i in plan and plan[i][1] is None:  # no check cell in the notebook: the test goes right after
            eid = plan[i][0]
            out.append(_nbgrader_test_cell(eid, points_of(eid, points), f"{grade_id(eid)}-test"[:64], scoring))
    return _finish(solution, out, stem, source_path, "nbgrader")


# --------------------------------------------------------------------------------- otter
_OTTER_MARKER = re.compile(r"^(\s*)###\s*(BEGIN|END) SOLUTION\b.*$", re.MULTILINE)


def _otter_config(stem: str) -> str:
    return (
        "# ASSIGNMENT CONFIG\n"
        f"name: {stem}\n"
        "init_cell: true\n"
        "check_all_cell: false\n"
        "export_cell: false\n"
        "run_tests: false\n"
        "generate: true\n"
        "tests:\n"
        "  ok_format: true\n"
    )


def _otter_tests(eid: str, gid: str, scoring: str) -> list[dict[str, Any]]:
    """The question's test cells: one for the whole exercise, or (``partial``) one per public test."""

    ex = registry.get(eid)
    call, message = _test_lines(eid, ex.name)
    run = f"from pagedlab.grading import check\n_result = {call}, show=False)\n"
    if scoring != "partial":
        return [_cell("code", run + f"assert _result.passed, {message}", cid=f"{gid}-test")]
    titles = [t.title for t in ex.tests if not t.hidden]
    return [
        _cell(
            "code",
            run + f"assert len(_result.outcomes) > {k} and _result.outcomes[{k}].passed, "
            f"_result.error or {f'exercise {eid}: test {title!r} did not pass'!r}",
            cid=f"{gid}-test{k}",
        )
        for k, title in enumerate(titles)
    ]


def _otter_question(
    eid: str, cell: dict[str, Any], points: float, scoring: str = DEFAULT_SCORING
) -> list[dict[str, Any]]:
    gid = grade_id(eid)
    solution = _OTTER_MARKER.sub(lambda m: f"{m.group(1)}# {m.group(2)} SOLUTION", cell_source(cell))
    aon = "false" if scoring == "partial" else "true"
    return [
        _cell("raw", f"# BEGIN QUESTION\nname: {gid}\npoints: {points:g}\nall_or_nothing: {aon}", cid=f"{gid}-q"),
        _cell("raw", "# BEGIN SOLUTION", cid=f"{gid}-s"),
        _clean(cell, solution),
        _cell("raw", "# END SOLUTION", cid=f"{gid}-se"),
        _cell("raw", "# BEGIN TESTS", cid=f"{gid}-t"),
        *_otter_tests(eid, gid, scoring),
        _cell("raw", "# END TESTS", cid=f"{gid}-te"),
        _cell("raw", "# END QUESTION", cid=f"{gid}-qe"),
    ]


def otter_source(
    solution: dict[str, Any],
    stem: str,
    source_path: str = "",
    points: Mapping[str, float] | None = None,
    scoring: str = DEFAULT_SCORING,
) -> dict[str, Any]:
    """The otter assign master notebook of a solution notebook (see the module docstring).

    Raises:
        LabsBuildError: see :func:`_plan`, or a solution region outside an exercise cell.
    """
    scoring = parse_scoring(scoring)
    cells, plan = _plan(solution, stem)
    out = [_cell("raw", _otter_config(stem), cid=f"{grade_id(stem)}-config"[:64])]
    for i, c in enumerate(cells):
        if i in plan:
            eid = plan[i][0]
            out += _otter_question(eid, c, points_of(eid, points), scoring)
            continue
        if BEGIN_SOLUTION in cell_source(c) or END_SOLUTION in cell_source(c):
            raise LabsBuildError(f"{stem}.ipynb cell {i}: a solution region outside a '# EXERCISE <id>' cell")
        out.append(_clean(c))
    return _finish(solution, out, stem, source_path, "otter")


def generator(
    fmt: str, points: Mapping[str, float] | None = None, scoring: str | None = None
) -> Callable[..., dict[str, Any]]:
    """``generate(solution, stem, source_path) -> notebook`` for ``--format fmt`` (``scoring``: ``--scoring``,
    default all-or-nothing).

    Raises:
        LabsBuildError: an unknown format or scoring rule.
    """
    try:
        scoring = parse_scoring(scoring)
    except PointsError as e:
        raise LabsBuildError(str(e)) from e

    if fmt == "labs":
        return generate_lab
    if fmt == "nbgrader":
        return partial(nbgrader_source, points=points, scoring=scoring)
    if fmt == "otter":
        return partial(otter_source, points=points, scoring=scoring)
    raise LabsBuildError(f"unknown --format {fmt!r}; one of {', '.join(FORMATS)}")
