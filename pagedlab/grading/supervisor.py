"""Running the learners' driver processes of ``pagedlab grade`` (the grader's process): each in a fresh folder
with copies of the notebooks, a scrubbed environment and resource limits, at most ``--jobs`` at once, under a
wall-clock timeout that kills the whole process group; their results read back capped
(:mod:`pagedlab.containment.reaper` takes every process left behind)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pagedlab.containment import reaper
from pagedlab.containment.limits import limits_preexec
from pagedlab.grading import registry
from pagedlab.grading.e2e import E2E_ALLOWANCE_S, E2E_CONFIG_LIMIT_S, E2E_MEMORY_MB
from pagedlab.grading.submissions import GradeError, Learner

__all__ = ["MAX_RESULT_BYTES", "TIME_SCALE_ENV", "exit_reason", "run_learners", "start_learner", "time_scale"]

MAX_RESULT_BYTES = 64 * 1024 * 1024


# --- running one learner ----------------------------------------------------------------------------------
def _scrubbed_env(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MPLCONFIGDIR": workdir,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "TRITON_INTERPRET": "1",
        "PYTHONHASHSEED": "0",
    }


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        with contextlib.suppress(OSError):
            proc.kill()


def exit_reason(rc: int | None, timed_out: bool, timeout: float, memory_mb: int) -> str:
    if timed_out:
        return f"stopped after {timeout:g} s (time limit): an endless loop, or very slow code?"
    if rc is None or rc == 0:
        return "the grading process ended before finishing (did your code call os._exit?)"
    if rc < 0:
        sig = -rc
        name = {
            int(signal.SIGKILL): "killed",
            signal.SIGSEGV: "crashed (segmentation fault)",
            signal.SIGABRT: "aborted",
            signal.SIGXCPU: "ran out of CPU time",
            signal.SIGBUS: "crashed (bus error)",
        }.get(sig, f"killed by signal {sig}")
        hint = f" (memory limit {memory_mb} MB?)" if sig in (signal.SIGKILL, signal.SIGABRT) else ""
        return f"the grading process {name}{hint}"
    return f"the grading process exited with status {rc} before finishing (did your code call os._exit?)"


class _Run:
    """One learner's sandboxed process, started by :func:`start_learner`."""

    def __init__(self, learner: Learner, timeout: float) -> None:
        self.learner = learner
        self.timeout = timeout
        self.info: dict[str, Any] = {"rc": None, "timed_out": False, "stdout": "", "seconds": 0.0, "error": ""}
        self.workdir = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.start = time.monotonic()
        self.log: Any = None

    def poll(self) -> bool:
        """True once the process has ended (killed at the deadline)."""
        if self.proc is None:
            return True
        if self.proc.poll() is not None:
            return True
        if time.monotonic() - self.start > self.timeout:
            self.info["timed_out"] = True
            _kill_group(self.proc)
            self.proc.wait()
            return True
        return False

    def finish(
        self, supervisor: reaper.Supervisor | None = None, keep: set[int] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Its result lines and process info, read once every process it started is gone
        (its process group, and through ``supervisor`` every orphan that is not in ``keep``)."""
        lines: list[dict[str, Any]] = []
        try:
            if self.proc is not None:
                _kill_group(self.proc)  # leftovers of its process group (there should be none)
                if supervisor is not None:
                    supervisor.kill_strays(keep or set())
                self.info["rc"] = self.proc.returncode
                self.info["seconds"] = round(time.monotonic() - self.start, 2)
                if self.log is not None:
                    self.log.close()
                self.info["stdout"] = _read_capped(os.path.join(self.workdir, "output.txt"), 20_000)
                lines = _read_results(os.path.join(self.workdir, "result.jsonl"))
        finally:
            if self.workdir:
                _remove_tree(self.workdir)
        return lines, self.info


def _copy_notebooks(learner: Learner, folder: str, run: _Run) -> list[str]:
    """Copy the learner's notebooks into ``folder`` as ``nb<i>_<name>``; return the copies' names."""
    names = []
    for i, nb in enumerate(learner.notebooks):
        dst = f"nb{i}_{re.sub(r'[^A-Za-z0-9._-]+', '_', nb.name)}"
        try:
            shutil.copyfile(nb, os.path.join(folder, dst))
        except OSError as e:
            run.info["error"] = f"{nb.name}: cannot be read ({e.strerror or e})"
            continue
        names.append(dst)
    return names


#: Environment variable multiplying every test's time limit (a slow or heavily shared grading machine).
TIME_SCALE_ENV = "PAGEDLAB_GRADE_TIME_SCALE"


def time_scale() -> float:
    """``$PAGEDLAB_GRADE_TIME_SCALE`` (default 1): the factor applied to each test's time limit (not to
    ``--timeout``, the learner's total). On a machine where many jobs share few cores, a test that calls
    the learner's code hundreds of times across the process boundary waits for the scheduler at every
    call, and can exceed its limit although the code is right.

    Raises:
        GradeError: the variable is set to something other than a number >= 1.
    """
    raw = os.environ.get(TIME_SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 1.0 or value == float("inf"):
        raise GradeError(f"${TIME_SCALE_ENV} must be a number >= 1 (a factor on each test's time limit), got {raw!r}")
    return value


def start_learner(
    learner: Learner,
    exercises: list[str] | None,
    hidden: Path | None,
    timeout: float,
    memory_mb: int,
    e2e_job: dict[str, Any] | None = None,
) -> _Run:
    """Start one learner's driver process (:mod:`pagedlab.grading.driver`) in a fresh folder.

    The folder holds the driver's job and results; its ``learner/`` sub-folder holds copies of the
    notebooks and is the only folder the learner's process may use. ``e2e_job``
    (:meth:`~pagedlab.grading.e2e.E2EPlan.job`) turns the end-to-end test on. Called from the main thread
    only (``preexec_fn`` is not safe with threads around).
    """
    scale = time_scale()
    extra = E2E_ALLOWANCE_S * scale if e2e_job else 0.0  # the end-to-end test has its own time, after the tests
    run = _Run(learner, timeout + extra)
    if not learner.notebooks:
        return run
    run.workdir = tempfile.mkdtemp(prefix="pagedlab-grade-")
    learner_dir = os.path.join(run.workdir, "learner")
    os.mkdir(learner_dir, 0o700)
    job = {
        "notebooks": _copy_notebooks(learner, learner_dir, run),
        "learner_dir": learner_dir,
        "exercises": exercises,
        "course": registry.course_module(),
        "hidden_dir": str(hidden) if hidden else None,
        "test_timeout": min(30.0, max(1.0, timeout / 4)) * scale,
        "time_scale": scale,
        "memory_mb": memory_mb,
        "cpu_s": int(timeout + extra) + 2,
        "result": "result.jsonl",
        "e2e": dict(e2e_job, limit=E2E_CONFIG_LIMIT_S * scale, time_scale=scale) if e2e_job else None,
    }
    with open(os.path.join(run.workdir, "job.json"), "w", encoding="utf-8") as f:
        json.dump(job, f)
    run.log = open(os.path.join(run.workdir, "output.txt"), "wb")  # noqa: SIM115 - lives as long as the run; closed when it ends
    run.start = time.monotonic()
    run.proc = subprocess.Popen(
        [sys.executable, "-I", "-m", "pagedlab.grading.driver", "job.json"],
        cwd=run.workdir,
        env=_scrubbed_env(run.workdir),
        stdin=subprocess.DEVNULL,
        stdout=run.log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
        # the driver's limits bound its children's: the end-to-end learner process needs E2E_MEMORY_MB
        preexec_fn=limits_preexec(max(memory_mb, 2048, E2E_MEMORY_MB if e2e_job else 0), int(timeout + extra) + 2),
    )
    return run


def run_learners(
    learners: Sequence[Learner],
    exercises: list[str] | None,
    hidden: Path | None,
    timeout: float,
    memory_mb: int,
    jobs: int,
    e2e_job: dict[str, Any] | None = None,
) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Run every learner (at most ``jobs`` processes at a time); results in the learners' order.

    Stopped (:class:`~pagedlab.containment.reaper.Stopped`, any exception): every process it started is
    killed and every temporary folder removed before the exception goes on; a line on stderr says so.
    """
    results: dict[int, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
    pending = list(enumerate(learners))
    running: dict[int, _Run] = {}
    with reaper.Supervisor() as supervisor:
        try:
            while pending or running:
                while pending and len(running) < jobs:
                    i, lr = pending.pop(0)
                    running[i] = start_learner(lr, exercises, hidden, timeout, memory_mb, e2e_job)
                for i in [i for i, r in running.items() if r.poll()]:
                    others = {r.proc.pid for j, r in running.items() if j != i and r.proc is not None}
                    results[i] = running[i].finish(supervisor, others)
                    del running[i]
                if running:
                    time.sleep(0.02)
        except BaseException as e:
            _stop_all(list(running.values()), supervisor, e)
            raise
    return [results[i] for i in range(len(learners))]


def _stop_all(runs: list[_Run], supervisor: reaper.Supervisor, why: BaseException) -> None:
    """Kill the process groups of ``runs`` and every stray, remove their folders, and say so on stderr."""
    for run in runs:
        if run.proc is not None:
            _kill_group(run.proc)
            run.proc.wait()
    strays = supervisor.kill_strays()
    folders = 0
    for run in runs:
        if run.log is not None:
            run.log.close()
        if run.workdir:
            _remove_tree(run.workdir)
            folders += not os.path.exists(run.workdir)
    what = f"stopped by {why}" if isinstance(why, reaper.Stopped) else f"stopped ({type(why).__name__})"
    print(
        f"pagedlab grade: {what}: killed {len(runs)} learner run(s) and {strays} other process(es) they left, "
        f"removed {folders} temporary folder(s); nothing was written",
        file=sys.stderr,
        flush=True,
    )


def _remove_tree(path: str) -> None:
    def fix(func: Any, p: str, _exc: Any) -> None:  # the learner may have removed permissions in its folder
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)


def _read_capped(path: str, n: int) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(n + 1)
    except OSError:
        return ""
    text = data[:n].decode("utf-8", "replace")
    return text + ("\n[... cut]" if len(data) > n else "")


def _read_results(path: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        if os.path.islink(path) or os.path.getsize(path) > MAX_RESULT_BYTES:
            return out
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("type"), str):
                    out.append(obj)
    except OSError:
        pass
    return out
