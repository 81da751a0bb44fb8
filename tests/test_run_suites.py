"""make test's runner (tests/run_suites.py): its two halves run the whole suite, each test exactly once."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_suites  # noqa: E402

REPO = run_suites.REPO
NBVAL = ["--nbval-lax", "--nbval-current-env"]


def collected(cmd: list[str]) -> list[str]:
    """The node ids ``cmd`` (a pytest command) collects."""
    args = [a for a in cmd if not a.startswith(("--junitxml", "--durations", "--timeout"))]
    r = subprocess.run(
        [*args, "--collect-only", "-q", "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return [line for line in r.stdout.splitlines() if "::" in line]


def test_the_halves_collect_the_whole_suite_each_test_once():
    solutions = ["solutions"]
    a_cmd, b_cmd = run_suites.half_commands(solutions, NBVAL, [])
    whole = collected(run_suites.pytest_command(["tests", *solutions], "x.xml", NBVAL))
    a, b = collected(a_cmd), collected(b_cmd)
    both = Counter(a) + Counter(b)
    assert [k for k, n in both.items() if n > 1] == []
    assert sorted(both) == sorted(whole)
    # each half has the folders it is meant to have: A the browser, twin and notebooks; B the rest
    assert {i.split("/")[0] + "/" + i.split("/")[1] for i in a if i.startswith("tests/")} == set(run_suites.A_PATHS)
    assert any(i.startswith("solutions/") for i in a) and not any(i.startswith("solutions/") for i in b)
    assert any(i.startswith("tests/grading/") for i in b)


@pytest.mark.parametrize(
    ("codes", "status"),
    [([0, 0], 0), ([0, 5], 0), ([5, 0], 0), ([5, 5], 5), ([1, 0], 1), ([0, 2], 2), ([5, 1], 1), ([3, 1], 3)],
)
def test_make_test_fails_when_either_half_fails(codes, status):
    assert run_suites.combined_status(codes) == status
