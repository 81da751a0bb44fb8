"""The capstone loads lab 08's Triton helper runnable in a process that never set ``TRITON_INTERPRET``
(lab 09's kernel, an instructor's shell), as ``pagedlab grade`` does, instead of dropping a passing part.

Also where triton is already imported, compiled for a GPU that is not there (lab 09's kernel, issue 39 item 5):
the part is checked as lab 08 checked it, in a fresh Python with the interpreter on. Before the fix the
capstone checked it in the lab 09 process, where the reference itself could not run, and told the learner
their helper "does not pass check() yet" although lab 08 passed it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
if sys.argv[2] == "triton imported first":
    import triton  # compiled for a GPU: this process has none, and TRITON_INTERPRET is not set
from pathlib import Path
from pagedlab.course.capstone import load_learner_parts
from pagedlab.grading.checking import passed_check
from pagedlab.grading.plug import learner_components
ns, notes = load_learner_parts(Path(sys.argv[1]))
assert not notes, notes
assert passed_check("08.triton_load_kv_tile", ns["triton_load_kv_tile"]), "the Triton helper failed check()"
comps, more = learner_components(ns)
assert comps.is_yours("triton_tile_load"), more
print("ok")
"""


@pytest.mark.parametrize("before", ["nothing imported", "triton imported first"])
def test_capstone_keeps_a_passing_triton_part_without_triton_interpret(tmp_path, before):
    pytest.importorskip("triton")
    (nb,) = (ROOT / "solutions").glob("08_*.ipynb")
    shutil.copy(nb, tmp_path / nb.name)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU: only the interpreter can run the helper
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), before],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stdout + res.stderr
