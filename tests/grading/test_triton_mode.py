"""Lab 08's Triton verdicts do not depend on what ran before in the process (issue 39, item 4).

How a process runs Triton is decided once, when triton is first imported (``pagedlab.kernels.runtime``).
Found in a run of many test files: ``kernels_can_run("cpu")`` read ``TRITON_INTERPRET`` at each call, so a test
that changed the variable and put ``os.environ`` back (``mock.patch.dict`` restores the whole dict) turned the
kernels off mid-run; and a process that imported triton compiled for a GPU on a CPU machine failed every
``08.triton_load_kv_tile`` test on the reference itself, which ``pagedlab grade`` counts as a broken test and
gives its points to everyone: a helper that never looks the block table up got 1.0 of 1.0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pagedlab.grading import registry
from pagedlab.grading.checking import check
from pagedlab.grading.runner import run_driver
from tests.grading.helpers import wrong_versions

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
TILE = "08.triton_load_kv_tile"
NO_TABLE_LOOKUP = next(w for w in wrong_versions() if w.exercise == TILE and w.name == "logical_block_as_physical")


@pytest.fixture
def interpreted_process():
    from pagedlab.kernels.runtime import interpreter_ready

    if not interpreter_ready():  # tests/conftest.py switches the interpreter on before anything imports triton
        pytest.fail("this test process imported triton without TRITON_INTERPRET=1", pytrace=False)


@pytest.mark.parametrize("later", [None, "0"], ids=["variable removed", "variable set to 0"])
def test_changing_triton_interpret_after_import_changes_no_verdict(interpreted_process, monkeypatch, later):
    from pagedlab.kernels.runtime import kernels_can_run

    if later is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # what mock.patch.dict(os.environ) restoring does
    else:
        monkeypatch.setenv("TRITON_INTERPRET", later)
    assert kernels_can_run("cpu")  # the process still runs Triton interpreted: nothing was re-imported
    ex = registry.get(TILE)
    helper = registry.snippet_object(TILE)  # decorated now, while the variable is away: compiled for a GPU
    for test in ex.public_tests()[:2]:
        got = run_driver(test, helper)
        assert got[-1]["kind"] == "end", got[-3:]
    wrong = registry.snippet_object(TILE, NO_TABLE_LOOKUP.source)
    res = check(wrong, TILE, show=False, pictures=False)
    caught = next(o for o in res.outcomes if o.title == NO_TABLE_LOOKUP.caught_by)
    assert caught.status == "failed", (caught.status, caught.message)


SCRIPT = """
import json, sys
import triton  # first, before any of the kit: compiled for a GPU, and this process has none
from pagedlab.grading import registry
from pagedlab.grading.checking import check
from pagedlab.grading.grade import E2EOptions, grade

res = check(registry.snippet_object(sys.argv[3], open(sys.argv[1]).read()), sys.argv[3], show=False)
(graded,) = grade([sys.argv[2]], sys.argv[2] + "-out", timeout=240, quiet=True, exercises=[sys.argv[3]],
                  e2e=E2EOptions(enabled=False), scoring="partial")  # partial: the source test's share shows
er = graded.exercises[sys.argv[3]]
print(json.dumps({"check": {o.title: o.status for o in res.outcomes}, "passed": res.passed, "text": res.text(),
                  "score": er.score, "max": er.max_score, "grade": {o.title: o.status for o in er.outcomes}}))
"""
#: The one test that runs no Triton: it reads the helper's source (a verdict any machine can give).
SOURCE_TEST = "what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids"


def test_a_process_that_cannot_run_triton_gives_no_verdict_and_no_points(tmp_path):
    """The reported run, reproduced: triton imported compiled for a GPU before the kit, no GPU. Before the fix
    ``check()`` said 'test broken (not your fault)' and ``pagedlab grade`` gave the wrong helper 1.0 of 1.0."""
    from tests.grading.helpers import write_notebook

    cell = tmp_path / "cell.py"
    cell.write_text(NO_TABLE_LOOKUP.source, encoding="utf-8")
    write_notebook(tmp_path / "subs" / "wrong.ipynb", [NO_TABLE_LOOKUP.source])
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(cell), str(tmp_path / "subs"), TILE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    runs_triton = {t.title for t in registry.get(TILE).public_tests()} - {SOURCE_TEST}
    for verdicts in (got["check"], got["grade"]):
        assert {verdicts[t] for t in runs_triton} == {"unavailable"}, verdicts
        assert verdicts[SOURCE_TEST] == "passed", verdicts  # the wrong helper's code reads like the solution's
    assert not got["passed"]
    assert "cannot be checked here" in got["text"] and "TRITON_INTERPRET" in got["text"], got["text"]
    assert got["score"] == round(got["max"] / (len(runs_triton) + 1), 4), got  # the source test's share only
