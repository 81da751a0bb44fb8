"""make test's runner (tests/run_suites.py) and its pytest-xdist groups (tests/conftest.py): a worker takes a
whole file, or all of tests/twin/; the run on two workers is the one-process run's tests, each once."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_suites  # noqa: E402

from tests.conftest import xdist_group  # noqa: E402

REPO = run_suites.REPO


@pytest.mark.parametrize(
    ("path", "group"),
    [
        ("tests/twin/test_fuzz.py", "tests/twin"),
        ("tests/twin/test_lab_cells.py", "tests/twin"),
        ("tests/grading/test_grade.py", "tests/grading/test_grade.py"),
        ("tests/test_twin_records.py", "tests/test_twin_records.py"),  # not under tests/twin/
        ("solutions/03_copy_on_write.ipynb", "solutions/03_copy_on_write.ipynb"),
    ],
)
def test_a_test_is_grouped_by_its_file_or_the_twin_folder(path, group):
    assert xdist_group(path) == group


def test_two_workers_take_whole_groups_and_run_each_test_once(tmp_path):
    """A real two-worker run of a few of the suite's files: every test ran once, each file's tests (and each
    notebook's cells, in order) on one worker, as in the one-process run."""
    files = ["tests/test_layout.py", "tests/test_routes.py", "tests/test_lab_markers.py", "solutions/00_welcome.ipynb"]
    cmd = run_suites.pytest_command(files, 2, ["-v", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env"])
    cmd = [a for a in cmd if not a.startswith("--junitxml")] + [f"--junitxml={tmp_path / 'j.xml'}"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    ran = re.findall(r"^\[(gw\d)\] \[\s*\d+%\] PASSED (.+?)\s*$", r.stdout, flags=re.M)
    ran = [(w, n.replace("::ipynb::", ".ipynb::")) for w, n in ran]  # xdist shows a notebook's cells so
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in ran:
        workers[nodeid.split("::")[0]].add(worker)
    assert sorted(workers) == sorted(files)
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
    assert {w for ws in workers.values() for w in ws} == {"gw0", "gw1"}  # both workers had work
    nodeids = [n for _, n in ran]
    assert len(nodeids) == len(set(nodeids))
    one = subprocess.run(
        [sys.executable, "-m", "pytest", *files, "--collect-only", "-q", "-p", "no:cacheprovider", "--nbval-lax"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    alone = {line for line in one.stdout.splitlines() if "::" in line}
    assert {n.split("@")[0] for n in nodeids} == alone
    cells = [n for n in nodeids if n.startswith("solutions/")]
    assert cells == sorted(cells, key=lambda n: int(re.search(r"Cell (\d+)", n)[1]))  # a notebook's cells in order
