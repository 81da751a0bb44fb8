"""`pagedlab grade` started from a plain shell, without ``TRITON_INTERPRET=1`` (an instructor's terminal, or
Gradescope's ``run_autograder``), grades lab 08's Triton exercise as it does under ``make test``.

Found by trying the kit as an instructor: without the variable, the end-to-end plan's ``triton kernel``
configuration imported Triton compiled for a GPU in the grader's process on a CPU machine, so (a) that
configuration was silently dropped and (b) every ``08.triton_load_kv_tile`` test then failed on the
reference itself and its points were given to everyone, a wrong tile load included. The grading runs in
a subprocess whose environment lacks the variable (this test process has it set by the Makefile).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pagedlab.grading import registry
from tests.grading.helpers import variant, write_notebook

ROOT = Path(__file__).resolve().parents[2]

GRADE = """
import json, sys
from pagedlab.grading.grade import E2EOptions, grade

results = grade([sys.argv[1]], sys.argv[2], timeout=240, quiet=True, e2e=E2EOptions(seed=1, prompts=1, tokens=1))
print(json.dumps({
    r.learner.name: {
        "score": r.exercises["08.triton_load_kv_tile"].score,
        "statuses": sorted({o.status for o in r.exercises["08.triton_load_kv_tile"].outcomes}),
        "e2e": [d.split(":")[0] for d in r.e2e.details] if r.e2e is not None else None,
    }
    for r in results
}))
"""


def test_grade_without_triton_interpret_in_the_environment(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    write_notebook(subs / "right.ipynb", [registry.snippet_source("08.triton_load_kv_tile")])
    unmasked = variant("08.triton_load_kv_tile", ("mask=mask[:, None], other=0.0)", ")"))
    write_notebook(subs / "wrong.ipynb", [unmasked])
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", GRADE, str(subs), str(tmp_path / "out")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    points = registry.get("08.triton_load_kv_tile").points
    assert got["right"]["score"] == points and got["right"]["statuses"] == ["passed"], got
    assert got["wrong"]["statuses"] == ["failed", "passed"], got  # no "internal": the reference itself runs
    assert got["wrong"]["score"] == 0, got  # one test failed: nothing, under the default all-or-nothing rule
    # the right part serves in the plain default run and in the Triton kernel run (dropped before the fix);
    # the wrong one fails its unit tests, so it is not plugged and serves nothing
    assert got["right"]["e2e"] == ["default", "triton kernel"], got
    assert got["wrong"]["e2e"] == [], got
