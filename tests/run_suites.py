"""``make test``'s runner: the whole suite as two pytest processes at once, on CI's two cores.

Run alone, the suite leaves a core idle much of the time: the grading tests are single-threaded Python and
subprocesses, the browser tests wait on a kernel and Chromium, the twin waits on vLLM's process. So ``make test``
(``--jobs 2``, the default) runs two independent halves side by side, each with one OpenMP/torch thread
(``OMP_NUM_THREADS=1`` unless the environment sets it; two 2-thread processes on two cores would make every
parallel region wait for a descheduled thread):

- **A** (``A_PATHS``): the course site's build (``website/build.py``: the English site, then the Chinese edition
  of ``--site-zh-labs``), then the browser tests (the site's test opens that build), the differential twin
  against real vLLM and nbval over ``solutions/``;
- **B**: everything else under ``tests/`` (grading, engine, kernels, components, installs ...).

Their summed durations are about equal (from CI's per-test timings). Each half writes its own log
(``tests/artifacts/pytest_{a,b}.log``) and junit file (``junit_{a,b}.xml``); their lines are echoed with a
``[A]``/``[B]`` prefix as they come. The exit status is 0 only when both halves pass (a half that selects no
test, e.g. under a narrowing ``-k``, counts as passed unless both select none).

``--jobs 1`` is the one-process run: pytest over everything with the site built in the background at nice 19.

Usage (what the Makefile runs)::

    python tests/run_suites.py [--jobs 2] [--site 1] [--site-zh-labs 00_welcome,02_block_pool] -- PYTEST_ARGS...
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts"
#: half A's paths (the rest of tests/ is half B); solutions/ is added when it holds notebooks
A_PATHS = ["tests/browser", "tests/twin"]
#: pytest's "no tests were collected" exit status
NO_TESTS = 5


def site_commands(zh_labs: str) -> list[tuple[list[str], Path, Path]]:
    """The site builds ``make test`` runs: (command, log, exit-status file) for the English site, then the
    Chinese edition of ``zh_labs``."""
    py = sys.executable
    runs = [
        ([py, "website/build.py", "--lang", "en", "--out", "build/site/en"], "site_build"),
        ([py, "website/build.py", "--lang", "zh", "--out", "build/site/zh", "--only", zh_labs], "site_build_zh"),
    ]
    return [(cmd, ARTIFACTS / f"{name}.log", ARTIFACTS / f"{name}.rc") for cmd, name in runs]


def build_site(zh_labs: str, nice: bool) -> None:
    """Build the site, each build's exit status to its ``.rc`` file (what the site's browser test waits for).
    The labs' "On real vLLM" cells take their not-installed branch (``PAGEDLAB_LAB_VLLM=off``, as in nbval):
    tests/twin runs them on real vLLM once."""
    env = {**os.environ, "PAGEDLAB_LAB_VLLM": "off"}
    for cmd, log, rc_file in site_commands(zh_labs):
        with open(log, "w") as out:
            rc = subprocess.call(
                cmd,
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=(lambda: os.nice(19)) if nice else None,
            )
        rc_file.write_text(f"{rc}\n")


def pytest_command(paths: list[str], junit: str, pytest_args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        *paths,
        "--timeout=900",
        "--durations=15",
        f"--junitxml={ARTIFACTS / junit}",
        *pytest_args,
    ]


def half_commands(solutions: list[str], nbval: list[str], extra: list[str]) -> tuple[list[str], list[str]]:
    """The two halves' pytest commands: A = ``A_PATHS`` + ``solutions`` (with nbval's options), B = the rest of
    tests/. Together they collect what ``pytest tests solutions`` does, each test once (tests/test_run_suites.py)."""
    a_cmd = pytest_command([*A_PATHS, *solutions], "junit_a.xml", [*nbval, *extra])
    b_cmd = pytest_command(["tests", *(f"--ignore={p}" for p in A_PATHS)], "junit_b.xml", extra)
    return a_cmd, b_cmd


def combined_status(codes: list[int]) -> int:
    """``make test``'s exit status from the halves': 0 when each passed or selected no test (pytest's 5), 5 when
    neither selected any, else the first failing half's."""
    if set(codes) <= {0, NO_TESTS}:
        return NO_TESTS if set(codes) == {NO_TESTS} else 0
    return next(rc for rc in codes if rc not in (0, NO_TESTS))


def run_half(name: str, cmd: list[str], env: dict, before=None) -> int:
    """Run one half: ``before()`` (the site build) then ``cmd``; every line to its log and, prefixed, to stdout."""
    log_path = ARTIFACTS / f"pytest_{name.lower()}.log"
    with open(log_path, "w") as log:
        t0 = time.monotonic()
        if before is not None:
            print(f"[{name}] building the course site first (logs {ARTIFACTS.name}/site_build*.log)", flush=True)
            before()
            print(f"[{name}] site built in {time.monotonic() - t0:.0f} s", flush=True)
        print(f"[{name}] {shlex.join(cmd[1:])}", flush=True)
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            sys.stdout.write(f"[{name}] {line}")
            sys.stdout.flush()
        rc = proc.wait()
        print(f"[{name}] pytest exited with {rc} after {time.monotonic() - t0:.0f} s (log {log_path})", flush=True)
        return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, choices=(1, 2), default=2)
    ap.add_argument("--site", type=int, choices=(0, 1), default=1, help="build the course site for its browser test")
    ap.add_argument("--site-zh-labs", default="00_welcome,02_block_pool")
    ap.add_argument("--nbval", default="", help="nbval's options (solutions/ is collected with them)")
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to pytest")
    args = ap.parse_args(argv)
    extra = [a for a in args.pytest_args if a != "--"] if args.pytest_args[:1] == ["--"] else args.pytest_args
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TRITON_INTERPRET": "1", "MPLBACKEND": "Agg"}
    rc_files = {}
    if args.site:
        for _, _, rc_file in site_commands(args.site_zh_labs):
            rc_file.unlink(missing_ok=True)
        rc_files = {
            "PAGEDLAB_SITE_BUILD_RC": str(ARTIFACTS / "site_build.rc"),
            "PAGEDLAB_SITE_ZH_BUILD_RC": str(ARTIFACTS / "site_build_zh.rc"),
        }
    env.update(rc_files)
    nbval = shlex.split(args.nbval)
    solutions = ["solutions"] if any((REPO / "solutions").glob("*.ipynb")) and nbval else []

    if args.jobs == 1:
        if args.site:
            print("==> building the course site in the background at nice 19", flush=True)
            threading.Thread(target=build_site, args=(args.site_zh_labs, True), daemon=True).start()
        cmd = pytest_command(["tests", *solutions], "junit.xml", [*nbval, *extra])
        return subprocess.call(cmd, cwd=REPO, env=env)

    env.setdefault("OMP_NUM_THREADS", "1")
    a_cmd, b_cmd = half_commands(solutions, nbval, extra)
    print(
        f"==> two halves at once, OMP_NUM_THREADS={env['OMP_NUM_THREADS']}: A = {' '.join(A_PATHS + solutions)}"
        " (after the site build), B = the rest of tests/",
        flush=True,
    )
    results: dict[str, int] = {}
    before = (lambda: build_site(args.site_zh_labs, False)) if args.site else None

    def half_a() -> None:
        try:
            results["A"] = run_half("A", a_cmd, env, before)
        except Exception as e:  # the site build or the log: half A failed, say why and let B finish
            print(f"[A] failed before pytest ended: {e!r}", flush=True)
            results["A"] = 1

    a = threading.Thread(target=half_a)
    a.start()
    results["B"] = run_half("B", b_cmd, env)
    a.join()
    print(f"==> halves: A exited {results['A']}, B exited {results['B']}", flush=True)
    for name in ("A", "B"):  # each half's summary again, together at the end of the log
        lines = (ARTIFACTS / f"pytest_{name.lower()}.log").read_text(errors="replace").splitlines()
        start = next(
            (i for i, line in enumerate(lines) if "short test summary" in line or "slowest" in line), len(lines) - 3
        )
        print(f"==> half {name}:\n" + "\n".join(lines[start:]), flush=True)
    return combined_status([results["A"], results["B"]])


if __name__ == "__main__":
    sys.exit(main())
