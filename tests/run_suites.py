"""``make test``'s runner: the course site built beside pytest, and pytest on every core.

Run in one process, the suite leaves a core idle much of the time: the grading tests are single-threaded Python
and subprocesses, the browser tests wait on a kernel and Chromium, the twin waits on vLLM's process. So
``make test`` (``--jobs 2``, CI's two cores) runs pytest with pytest-xdist's workers (``-n 2``):
a worker takes a whole group at a time - a test file (its module fixtures set up once; a notebook's cells in
order, in one kernel) or all of ``tests/twin/`` (one real-vLLM session fixture), see ``tests/conftest.py``
- and the next group goes to whichever worker is free, so neither waits on the other's share. Every process
gets one OpenMP/torch thread (``OMP_NUM_THREADS=1`` unless the environment sets it): two 2-thread processes on
two cores make every parallel region wait for a descheduled thread (10x slower measured, not 2x).

Meanwhile the course site is built (``website/build.py``: the English site, then the Chinese edition of
``--site-zh-labs``; logs ``tests/artifacts/site_build*.log``), each build's exit status to its ``.rc`` file, which
the site's browser test (ordered last) waits for. ``--jobs 1``: one pytest process, the build at nice 19.

Usage (what the Makefile runs)::

    python tests/run_suites.py [--jobs 2] [--site 1] [--site-zh-labs 00_welcome,02_block_pool] [--nbval OPTS] -- PYTEST_ARGS...
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts"


def site_commands(zh_labs: str) -> list[tuple[list[str], Path, Path]]:
    """The site builds ``make test`` runs: (command, log, exit-status file) for the English site, then the
    Chinese edition of ``zh_labs``."""
    py = sys.executable
    runs = [
        ([py, "website/build.py", "--lang", "en", "--out", "build/site/en"], "site_build"),
        ([py, "website/build.py", "--lang", "zh", "--out", "build/site/zh", "--only", zh_labs], "site_build_zh"),
    ]
    return [(cmd, ARTIFACTS / f"{name}.log", ARTIFACTS / f"{name}.rc") for cmd, name in runs]


def build_site(zh_labs: str, env: dict[str, str], nice: bool) -> None:
    """Build the site, each build's exit status to its ``.rc`` file (what the site's browser test waits for).
    The labs' "On real vLLM" cells take their not-installed branch (``PAGEDLAB_LAB_VLLM=off``, as in nbval):
    tests/twin runs them on real vLLM once."""
    env = {**env, "PAGEDLAB_LAB_VLLM": "off"}
    for cmd, log, rc_file in site_commands(zh_labs):
        with open(log, "w") as out:
            rc = subprocess.call(
                cmd,
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=(lambda: os.nice(19)) if nice else None,  # noqa: PLW1509 - only sets the child's priority
            )
        rc_file.write_text(f"{rc}\n")


def pytest_command(paths: list[str], jobs: int, pytest_args: list[str]) -> list[str]:
    """``python -m pytest`` over ``paths`` with ``make test``'s options; ``jobs`` > 1: that many xdist workers."""
    workers = ["-n", str(jobs)] if jobs > 1 else []  # the scheduler: tests/conftest.py
    return [
        sys.executable,
        "-m",
        "pytest",
        *paths,
        *workers,
        "--timeout=900",
        "--durations=25",
        f"--junitxml={ARTIFACTS / 'junit.xml'}",
        *pytest_args,
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers (1: one process)")
    ap.add_argument("--site", type=int, choices=(0, 1), default=1, help="build the course site for its browser test")
    ap.add_argument("--site-zh-labs", default="00_welcome,02_block_pool")
    ap.add_argument("--nbval", default="", help="nbval's options (solutions/ is collected with them)")
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to pytest")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TRITON_INTERPRET": "1", "MPLBACKEND": "Agg"}
    if args.jobs > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    build = None
    if args.site:
        for _, _, rc_file in site_commands(args.site_zh_labs):
            rc_file.unlink(missing_ok=True)
        env["PAGEDLAB_SITE_BUILD_RC"] = str(ARTIFACTS / "site_build.rc")
        env["PAGEDLAB_SITE_ZH_BUILD_RC"] = str(ARTIFACTS / "site_build_zh.rc")
        nice = args.jobs == 1
        print(
            f"==> building the course site beside the tests{' at nice 19' if nice else ''} (logs "
            f"{ARTIFACTS.relative_to(REPO)}/site_build*.log)",
            flush=True,
        )
        build = threading.Thread(target=build_site, args=(args.site_zh_labs, env, nice), daemon=True)
        build.start()
    nbval = shlex.split(args.nbval)
    solutions = ["solutions"] if nbval and any((REPO / "solutions").glob("*.ipynb")) else []
    cmd = pytest_command(["tests", *solutions], args.jobs, [*nbval, *extra])
    print(f"==> OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', '(unset)')} {shlex.join(cmd[1:])}", flush=True)
    rc = subprocess.call(cmd, cwd=REPO, env=env)
    if build is not None and build.is_alive():  # a narrowed run that left the site test out: do not wait for it
        print("==> the site build is still running; it is left to finish on its own", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
