"""Containment of learner code under `pagedlab grade` (issue 22 item 2, issue 26 items 4 and 6).

* The kernel layer alone (pagedlab.containment.kernel, no Python guard): a process that applied it
  cannot start a process or a program, load new code, write outside its folder or signal others.
* The attacks of the issues, each graded as a submission: ``dlopen(None)`` -> libc's ``system()``
  starting a detached process that rewrites the reports after the run; ``kill(0, ...)`` of the
  driver's process group; a lone surrogate and control characters in a learner's message; a part
  that records the hidden tests' inputs and uses them in the end-to-end run.
* ``pagedlab grade`` stopped by SIGINT or SIGTERM while a learner's code loops: every process it
  started ends and its temporary folders are removed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from pagedlab.containment import kernel as contain
from pagedlab.grading import registry
from pagedlab.grading.grade import E2EOptions, grade
from tests.grading.helpers import write_notebook

ROOT = Path(__file__).resolve().parents[2]
QUEUE = registry.snippet_source("02.free_queue")
SLOT = registry.snippet_source("02.slot_mapping")
LINUX = sys.platform == "linux" and contain.landlock_abi() >= 1
needs_kernel = pytest.mark.skipif(not LINUX, reason="Landlock/seccomp need Linux >= 5.13 with Landlock enabled")


# --- the kernel layer on its own -------------------------------------------------------------------------
def _probe(code: str, *args: object) -> tuple[dict[str, str], str]:
    """Run a probe script in a fresh interpreter: its ``name RESULT`` lines as a dict, and all it printed."""
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    got = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    return got, done.stdout + done.stderr


KERNEL_PROBE = r"""
import ctypes, mmap, os, sys, threading
from pagedlab.containment import kernel as contain
work, outside = sys.argv[1], sys.argv[2]
print("landlock:", repr(contain.restrict_files(work, [sys.base_prefix, sys.prefix, os.path.dirname(contain.__file__), "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev"])))
print("seccomp:", repr(contain.deny_syscalls()))
libc = ctypes.CDLL(None)
def attempt(name, fn):
    try:
        got = fn()
        print(name, "ALLOWED", repr(got)[:60], flush=True)
    except BaseException as e:
        print(name, "DENIED", type(e).__name__, flush=True)
attempt("system", lambda: libc.system(("touch " + outside + "/spawned").encode()) == 0 or 1 / 0)
attempt("fork", os.fork)
attempt("raw-fork", lambda: libc.syscall(57) >= 0 or 1 / 0)
attempt("raw-execve", lambda: libc.syscall(59, b"/bin/true", None, None) >= 0 or 1 / 0)
attempt("new-library", lambda: ctypes.CDLL("libcurl.so.4"))
attempt("exec-memory", lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC))
attempt("write-outside", lambda: open(outside + "/planted", "w"))
attempt("read-outside", lambda: open(outside + "/secret").read())
attempt("kill-parent", lambda: os.kill(os.getppid(), 0))
attempt("kill-group", lambda: os.kill(0, 0))
attempt("write-inside", lambda: open(work + "/mine", "w").write("x"))
attempt("thread", lambda: [t.start() or t.join() for t in [threading.Thread(target=print)]])
attempt("kill-self", lambda: os.kill(os.getpid(), 0))
"""


@needs_kernel
def test_the_kernel_layer_alone_denies_processes_programs_new_code_outside_writes_and_signals(tmp_path):
    """No audit hook here: what holds is the kernel's (Landlock + seccomp), whatever Python code does."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("s")
    got, printed = _probe(KERNEL_PROBE, work, outside)
    assert got.get("landlock:") == "''" and got.get("seccomp:") == "''", printed
    for attack in (
        "system",
        "fork",
        "raw-fork",
        "raw-execve",
        "new-library",
        "exec-memory",
        "write-outside",
        "read-outside",
        "kill-parent",
        "kill-group",
    ):
        assert got.get(attack, "").startswith("DENIED"), (attack, printed)
    for allowed in ("write-inside", "thread", "kill-self"):
        assert got.get(allowed, "").startswith("ALLOWED"), (allowed, printed)
    assert not (outside / "spawned").exists() and not (outside / "planted").exists()


METADATA_PROBE = r"""
import os, sys
from pagedlab.containment import kernel as contain
work, outside, readable = sys.argv[1], sys.argv[2], sys.argv[3]
print("landlock:", repr(contain.restrict_files(work, [sys.base_prefix, sys.prefix, os.path.dirname(contain.__file__), readable, "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev"])))
print("seccomp:", repr(contain.deny_syscalls()))
fd = os.open(readable + "/kitfile", os.O_RDONLY)
folder = os.open(readable, os.O_RDONLY)
def attempt(name, fn):
    try:
        fn()
        print(name, "ALLOWED", flush=True)
    except OSError as e:
        print(name, "DENIED", e.errno, flush=True)
attempt("chmod-path-outside", lambda: os.chmod(outside + "/secret", 0o600))
attempt("fchmod-readable", lambda: os.fchmod(fd, 0o600))
attempt("fchmodat-readable", lambda: os.chmod("kitfile", 0o600, dir_fd=folder))
attempt("fchown-readable", lambda: os.chown(fd, os.getuid(), os.getgid()))
attempt("futimens-readable", lambda: os.utime(fd, (0, 0)))
attempt("utimensat-outside", lambda: os.utime(outside + "/secret", (0, 0)))
attempt("fsetxattr-readable", lambda: os.setxattr(fd, "user.pagedlab", b"1"))
attempt("chmod-inside", lambda: os.chmod(work + "/mine", 0o600))
attempt("write-inside", lambda: open(work + "/mine2", "w").write("x"))
"""


@needs_kernel
def test_the_kernel_layer_alone_refuses_changing_a_files_mode_owner_times_or_attributes(tmp_path):
    """Landlock covers no file metadata: without seccomp's refusal, learner code that got past the guard could
    take the execute bit off the grader's interpreter (every later learner's run then fails to start) or change
    the kit's files, by path or through a descriptor it may open for reading (found by a fresh instructor's trial)."""
    work, outside, readable = tmp_path / "work", tmp_path / "outside", tmp_path / "readable"
    for d in (work, outside, readable):
        d.mkdir()
    (work / "mine").write_text("m")
    for f in (outside / "secret", readable / "kitfile"):
        f.write_text("s")
        f.chmod(0o644)
    before = {f: (f.stat().st_mode, f.stat().st_mtime_ns) for f in (outside / "secret", readable / "kitfile")}
    got, printed = _probe(METADATA_PROBE, work, outside, readable)
    assert got.get("landlock:") == "''" and got.get("seccomp:") == "''", printed
    for attack in (
        "chmod-path-outside",
        "fchmod-readable",
        "fchmodat-readable",
        "fchown-readable",
        "futimens-readable",
        "utimensat-outside",
        "fsetxattr-readable",
        "chmod-inside",  # seccomp sees no paths: the learner's own files too (no exercise needs it)
    ):
        assert got.get(attack) == "DENIED 1", (attack, printed)  # EPERM, from the filter
    assert got.get("write-inside") == "ALLOWED", printed
    assert {f: (f.stat().st_mode, f.stat().st_mtime_ns) for f in before} == before


LIMITS_PROBE = r"""
import os, resource, sys
from pagedlab.containment import kernel as contain
print("seccomp:", repr(contain.deny_syscalls()))
def attempt(name, fn):
    try:
        fn()
        print(name, "ALLOWED", flush=True)
    except OSError as e:
        print(name, "DENIED", e.errno, flush=True)
    except ValueError as e:  # resource.setrlimit reports EPERM as "not allowed to raise maximum limit"
        print(name, "DENIED", 1 if "not allowed" in str(e) else repr(e), flush=True)
nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
parent_fsize = resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE)
nice = os.getpriority(os.PRIO_PROCESS, 0)
# each attempt, were it allowed, sets what is already set: the probe changes nothing either way
attempt("getrlimit", lambda: resource.getrlimit(resource.RLIMIT_AS))
attempt("prlimit-read-parent", lambda: resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE))
attempt("setrlimit-own", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile))
attempt("prlimit-set-parent", lambda: resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, parent_fsize))
attempt("setpriority-own", lambda: os.setpriority(os.PRIO_PROCESS, 0, nice))
attempt("setpriority-parent", lambda: os.setpriority(os.PRIO_PROCESS, os.getppid(), os.getpriority(os.PRIO_PROCESS, os.getppid())))
attempt("sched_setscheduler", lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)))
attempt("sched_setparam", lambda: os.sched_setparam(0, os.sched_param(0)))
attempt("chroot", lambda: os.chroot("/"))
"""


@needs_kernel
def test_the_kernel_layer_alone_refuses_changing_limits_priorities_and_the_machine():
    """The learner's ``RLIMIT_AS``/``RLIMIT_CPU``/``RLIMIT_FSIZE`` are set before its code runs: as root
    (Gradescope) it could raise them, and as the grader's user lower its parent's (``RLIMIT_FSIZE`` 0 kills the
    driver at its next write) or renice it; reading a limit stays allowed (glibc's ``getrlimit`` is
    ``prlimit64`` with no new limit). Every attempt sets what is already set, so the probe changes nothing."""
    got, printed = _probe(LIMITS_PROBE)
    assert got.get("seccomp:") == "''", printed
    assert got.get("getrlimit") == "ALLOWED" and got.get("prlimit-read-parent") == "ALLOWED", printed
    for attack in (
        "setrlimit-own",
        "prlimit-set-parent",
        "setpriority-own",
        "setpriority-parent",
        "sched_setscheduler",
        "sched_setparam",
        "chroot",
    ):
        assert got.get(attack) == "DENIED 1", (attack, printed)  # EPERM, from the filter


def test_a_kernel_without_landlock_is_said_not_hidden(monkeypatch):
    monkeypatch.setattr(contain, "landlock_abi", lambda: 0)
    assert "Landlock is not available" in contain.restrict_files("/tmp", [])


# --- the attacks, graded -----------------------------------------------------------------------------------
def _slot_with_load(prelude: str) -> str:
    """02.slot_mapping, right, after ``prelude`` runs when the cell loads."""
    return "# EXERCISE 02.slot_mapping\n" + textwrap.dedent(prelude) + "\n" + SLOT.split("\n", 1)[1]


def _attacks(out: Path, marks: Path, probe: Path) -> dict[str, list[str]]:
    system = f"""
        import ctypes
        try:
            _rc = ctypes.CDLL(None).system(
                b"(sleep 3; echo HACKED > {out}/grades.csv; echo HACKED > {out}/all_learners.json; "
                b"touch {marks}/system-ran) >/dev/null 2>&1 &")
            print("SYSTEM returned", _rc, flush=True)
        except Exception as e:
            print("SYSTEM denied", type(e).__name__, flush=True)
    """
    group = """
        import os, signal
        try:
            os.kill(0, signal.SIGKILL)  # the driver's whole process group
        except Exception as e:
            print("GROUP denied", type(e).__name__, flush=True)
    """
    surrogate = (
        "# EXERCISE 02.slot_mapping\n"
        "def slot_mapping(block_table, positions, block_size):\n"
        "    raise ValueError('LONE \\ud800 ESC \\x1b[31m NUL \\x00 BELL \\x07 \\u2028 \\u674e\\u96f7 \\U0001f600')\n"
    )
    stdlib = """
        import array, cmath, unicodedata, zlib, subprocess
        print("STDLIB loaded", len(array.array("i", [1, 2])), cmath.sqrt(-1), unicodedata.name("a"),
              len(zlib.compress(b"x")), flush=True)
    """
    metadata = f"""
        import os
        def _metadata_attacks():
            target = {str(probe / "kitfile")!r}
            folder = os.path.dirname(target)
            for name, attack in [
                ("fchmod", lambda: os.fchmod(os.open(target, os.O_RDONLY), 0o600)),
                ("chmod-dir-fd", lambda: os.chmod("kitfile", 0o600, dir_fd=os.open(folder, os.O_RDONLY))),
                ("futime", lambda: os.utime(os.open(target, os.O_RDONLY), (0, 0))),
                ("fchown", lambda: os.chown(os.open(target, os.O_RDONLY), os.getuid(), os.getgid())),
                ("fsetxattr", lambda: os.setxattr(os.open(target, os.O_RDONLY), "user.pagedlab", b"1")),
            ]:
                try:
                    attack()
                    print("METADATA", name, "SUCCEEDED", flush=True)
                except Exception as e:
                    print("METADATA", name, "denied", type(e).__name__, e, flush=True)
        _metadata_attacks()
    """
    limits = """
        import os, resource
        def _limit_attacks():
            for name, attack in [
                ("raise-own-memory", lambda: resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)),
                ("parent-fsize", lambda: resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, (0, 0))),
            ]:
                try:
                    attack()
                    print("LIMITS", name, "SUCCEEDED", flush=True)
                except Exception as e:
                    print("LIMITS", name, "denied", type(e).__name__, e, flush=True)
        _limit_attacks()
    """
    return {
        "honest": [QUEUE, SLOT],
        "metadata": [QUEUE, _slot_with_load(metadata)],
        "limits": [QUEUE, _slot_with_load(limits)],
        "stdlib": [QUEUE, _slot_with_load(stdlib)],
        "system_detached": [QUEUE, _slot_with_load(system)],
        "group_kill": [QUEUE, _slot_with_load(group)],
        "surrogate": [QUEUE, surrogate],
    }


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    root = tmp_path_factory.mktemp("contain")
    out, marks = root / "out", root / "marks"
    marks.mkdir()
    # a file of the grader's user in a folder the learner's process may read (as the kit, the venv and the
    # interpreter are): /dev/shm is one of the guard's and the kernel's readable system folders
    probe = Path(tempfile.mkdtemp(prefix="pagedlab-metadata-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    (probe / "kitfile").write_text("k")
    (probe / "kitfile").chmod(0o644)
    before = ((probe / "kitfile").stat().st_mode, (probe / "kitfile").stat().st_mtime_ns)
    try:
        for name, cells in _attacks(out, marks, probe).items():
            write_notebook(root / "subs" / f"{name}.ipynb", cells)
        results = grade([root / "subs"], out, timeout=40, memory_mb=1024, jobs=2, quiet=True, e2e=E2EOptions(False))
        time.sleep(5)  # a detached process of the system() attack would have rewritten the reports by now
        after = ((probe / "kitfile").stat().st_mode, (probe / "kitfile").stat().st_mtime_ns)
        try:
            xattrs = os.listxattr(probe / "kitfile")
        except OSError:
            xattrs = []
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return {
        "out": out,
        "marks": marks,
        "by": {r.learner.name: r for r in results},
        "metadata": {"before": before, "after": after, "xattrs": xattrs},
    }


def test_dlopen_none_and_system_start_nothing_and_the_reports_stay(attacked):
    out, by = attacked["out"], attacked["by"]
    assert not (attacked["marks"] / "system-ran").exists()
    assert "HACKED" not in (out / "grades.csv").read_text()
    combined = json.loads((out / "all_learners.json").read_text())
    assert combined["learners"]["honest"]["score"] == 2.0
    log = (out / "logs" / "system_detached.txt").read_text()
    # the guard refuses dlopen(None) (GuardError); were it fooled, the kernel refuses the process: 127 << 8
    assert "SYSTEM denied GuardError" in log or "SYSTEM returned 32512" in log, log
    assert by["system_detached"].exercises["02.slot_mapping"].score == 1.0  # its right part still counts
    assert by["honest"].score == 2.0


def test_a_learner_cannot_change_the_mode_times_owner_or_attributes_of_a_file_it_may_read(attacked):
    """``os.fchmod(os.open(sys.executable, os.O_RDONLY), 0o644)`` in a learner's cell took the execute bit off
    the grader's interpreter: every later learner's run failed to start and `pagedlab grade` ended in
    PermissionError with no report written. The guard checked only path arguments (a descriptor or a
    ``dir_fd`` went through) and Landlock covers no metadata (found by a fresh instructor's trial)."""
    m = attacked["metadata"]
    assert m["after"] == m["before"] and "user.pagedlab" not in m["xattrs"], m
    log = (attacked["out"] / "logs" / "metadata.txt").read_text()
    for attack in ("fchmod", "chmod-dir-fd", "futime", "fchown", "fsetxattr"):
        assert f"METADATA {attack} denied GuardError" in log, (attack, log)  # a clear refusal, from the guard
    assert "SUCCEEDED" not in log
    r = attacked["by"]["metadata"]
    assert r.status == "ok" and r.score == 2.0, r.messages  # its code is right: refused attempts cost nothing
    assert attacked["by"]["honest"].score == 2.0


def test_a_learner_cannot_raise_its_limits_or_lower_the_drivers(attacked):
    """Under ``pagedlab grade``: raising its own memory limit (root can) and setting its driver's
    ``RLIMIT_FSIZE`` to 0 (the driver would die at its next write and the learner's results with it) are
    refused with a clear error, and the learner's right code still earns its points."""
    log = (attacked["out"] / "logs" / "limits.txt").read_text()
    for attack in ("raise-own-memory", "parent-fsize"):
        assert f"LIMITS {attack} denied GuardError" in log, (attack, log)
    assert "SUCCEEDED" not in log
    r = attacked["by"]["limits"]
    assert r.status == "ok" and r.score == 2.0, r.messages


def test_the_standard_librarys_native_modules_import_in_a_learner_cell(attacked):
    """The guide says the standard library is loaded: its extension modules (lib-dynload, outside the venv
    the grader runs in) are preloaded before the seccomp filter forbids loading new code."""
    r = attacked["by"]["stdlib"]
    log = (attacked["out"] / "logs" / "stdlib.txt").read_text()
    assert "STDLIB loaded 2 1j LATIN SMALL LETTER A" in log, log
    assert r.status == "ok" and r.score == 2.0, r.messages


def test_killing_the_drivers_process_group_is_denied(attacked):
    r = attacked["by"]["group_kill"]
    assert r.status == "ok" and r.score == 2.0, r.messages
    log = (attacked["out"] / "logs" / "group_kill.txt").read_text()
    assert "GROUP denied GuardError" in log or "GROUP denied PermissionError" in log, log  # guard, else kernel


def test_any_learner_text_is_written_escaped_and_stops_nobody_else(attacked):
    out, r = attacked["out"], attacked["by"]["surrogate"]
    assert r.exercises["02.free_queue"].score == 1.0
    html = (out / "feedback" / "surrogate.html").read_text(encoding="utf-8")
    assert "LONE \\ud800 ESC \\x1b[31m NUL \\x00 BELL \\x07 \\u2028 李雷 😀" in html
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8")  # strict: every file is valid UTF-8
            assert "\x1b" not in text and "\x00" not in text, path
    for name in attacked["by"]:
        assert (out / "feedback" / f"{name}.html").exists() and (out / "logs" / f"{name}.txt").exists()
        assert json.loads((out / "gradescope" / name / "results.json").read_text())["tests"]
    combined = json.loads((out / "all_learners.json").read_text())
    assert set(combined["learners"]) == set(attacked["by"])
    assert not list(out.rglob("*.tmp"))  # atomic writes leave no temporary file behind


@pytest.mark.skipif(sys.platform != "linux", reason="a file name that is not UTF-8 (Linux allows any bytes)")
def test_a_learners_file_name_is_escaped_on_the_console_too(tmp_path):
    """The learner's name (their file's name) is printed in the score lines: a byte that is not UTF-8 (a lone
    surrogate in Python) made `pagedlab grade` end in UnicodeEncodeError on a strict UTF-8 console, after the
    reports; a C1 control (CSI, 0x9b) reached the instructor's terminal as it was."""
    write_notebook(tmp_path / "subs" / "plain.ipynb", [SLOT])
    write_notebook(tmp_path / "subs" / "tmp.ipynb", [SLOT])
    odd = b"/odd\xff" + "\u009b2J.ipynb".encode()  # a byte that is not UTF-8, then U+009B in UTF-8
    os.rename(tmp_path / "subs" / "tmp.ipynb", os.fsencode(tmp_path / "subs") + odd)
    env = dict(os.environ, PYTHONIOENCODING="utf-8:strict")
    cli = "from pagedlab.cli import main; raise SystemExit(main())"
    cmd = [sys.executable, "-c", cli, "grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--no-e2e"]
    done = subprocess.run(cmd, env=env, capture_output=True, cwd=ROOT, timeout=300)
    out = done.stdout.decode("utf-8")  # strict: the console got UTF-8 only
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert "  odd\\udcff\\x9b2J " in out and "\x9b" not in out and "  plain " in out, out
    assert sorted(p.name for p in (tmp_path / "out" / "feedback").iterdir()) == ["odd_udcff_x9b2J.html", "plain.html"]


# --- the end-to-end run sees nothing of the hidden tests' run --------------------------------------------------
HIDDEN_TEST = """
from pagedlab.grading import hidden_test

@hidden_test("02.slot_mapping", "a huge block size")
def _(fn, rec):
    rec.observe("slots", fn([3, 9], [70, 127], 64))
"""

#: Right everywhere, but it records every call's arguments in its folder; a process that finds a
#: hidden test's input there (block size 64) in the engine returns wrong slots (the tokens then differ)
#: and raises the input (the error text would carry it) - so the end-to-end row shows whether the
#: run saw the hidden tests' state.
STATEFUL = """# EXERCISE 02.slot_mapping
import os, sys
_SEEN = open("seen.txt").read() if os.path.exists("seen.txt") else ""

def slot_mapping(block_table, positions, block_size):
    with open("seen.txt", "a") as f:
        f.write(repr((list(block_table), list(positions), block_size)) + "\\n")
    if "pagedlab.engine.llm" in sys.modules and ", 64)" in _SEEN:
        raise ValueError("HIDDEN-INPUTS " + _SEEN.replace("\\n", " "))
    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]
"""

#: Right in the unit tests; in the engine it raises with a text of its own.
TALKER = """# EXERCISE 02.slot_mapping
import sys

def slot_mapping(block_table, positions, block_size):
    if "pagedlab.engine.llm" in sys.modules:
        raise ValueError("E2E-TEXT-9191 chosen by the learner")
    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]
"""


@pytest.fixture(scope="module")
def e2e_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e_state")
    (root / "hidden").mkdir()
    (root / "hidden" / "extra.py").write_text(HIDDEN_TEST)
    write_notebook(root / "subs" / "stateful.ipynb", [STATEFUL])
    write_notebook(root / "subs" / "talker.ipynb", [TALKER])
    results = grade(
        [root / "subs"], root / "out", hidden_tests=root / "hidden", timeout=120, quiet=True, e2e=E2EOptions(seed=1)
    )
    by = {r.learner.name: r for r in results}
    if by["stateful"].e2e is None or by["stateful"].e2e.status == "not run":
        pytest.skip(f"the end-to-end test cannot run here: {by['stateful'].e2e}")  # no model cached
    return {"out": root / "out", "by": by}


@needs_kernel
def test_the_end_to_end_run_sees_no_state_of_the_hidden_tests_run(e2e_run):
    r = e2e_run["by"]["stateful"]
    hidden = [o for o in r.exercises["02.slot_mapping"].outcomes if o.hidden]
    assert hidden and all(o.passed for o in hidden)  # the hidden test ran (and wrote its input down)
    assert r.e2e.status == "passed", r.e2e  # a fresh folder: the engine's process found nothing
    for path in e2e_run["out"].rglob("*"):
        if path.is_file():
            assert "HIDDEN-INPUTS" not in path.read_text() and "[70, 127]" not in path.read_text(), path


def test_learner_text_from_the_end_to_end_run_reaches_only_the_instructor(e2e_run):
    out, r = e2e_run["out"], e2e_run["by"]["talker"]
    assert r.e2e.status == "failed" and "in component slot_mapping" in r.e2e.line, r.e2e
    assert "raised ValueError" in r.e2e.line and "kept out of this report" in r.e2e.line, r.e2e.line
    for path in [out / "feedback" / "talker.html", out / "grades.csv"]:
        assert "E2E-TEXT-9191" not in path.read_text(), path
    assert "E2E-TEXT-9191" in (out / "logs" / "talker.txt").read_text()  # the instructor sees it
    # on Gradescope: not in what the learner sees, and in the instructor-only test (the one place an instructor
    # reads it there: run_autograder's folders are gone after the run), though nothing was flagged
    gs = json.loads((out / "gradescope" / "talker" / "results.json").read_text())
    shown = [gs["output"]] + [t["output"] for t in gs["tests"] if t["visibility"] != "hidden"]
    assert not any("E2E-TEXT-9191" in text for text in shown), shown
    instructor = [t for t in gs["tests"] if t["visibility"] == "hidden"]
    assert not gs["extra_data"]["flags"] and r.status == "ok", (gs["extra_data"], r.status)
    assert len(instructor) == 1 and "E2E-TEXT-9191" in instructor[0]["output"], gs["tests"]


# --- stopped by a signal -----------------------------------------------------------------------------------------
def _processes_in(folder: Path) -> list[int]:
    """Pids whose working folder is under ``folder``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cwd = os.readlink(f"/proc/{name}/cwd")
            except OSError:
                continue
            if cwd.startswith(str(folder)):
                out.append(int(name))
    return out


def _tree(pid: int) -> list[int]:
    """Every descendant of ``pid`` now (children, their children ...), from /proc."""
    from pagedlab.containment.reaper import children

    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie has ended: only its exit status is left)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_grade_stops_every_process_and_removes_its_temporary_folders(tmp_path, sig):
    loop = "# EXERCISE 02.slot_mapping\ndef slot_mapping(block_table, positions, block_size):\n    while True:\n        pass\n"
    write_notebook(tmp_path / "subs" / "looper.ipynb", [loop])
    write_notebook(tmp_path / "subs" / "looper2.ipynb", [loop])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    cli = "from pagedlab.cli import main; raise SystemExit(main())"
    cmd = [sys.executable, "-c", cli, "grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(
        [*cmd, "--no-e2e", "--timeout", "120", "--jobs", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any(
            "pagedlab.grading.sandbox" in _cmdline(p) for p in _processes_in(tmp)
        ):
            time.sleep(0.2)
        time.sleep(1.0)  # the learner's code is looping now
        assert _processes_in(tmp), "no learner process started"
        tree = _tree(proc.pid)  # every process the grader started: drivers and the learners' processes under them
        assert any("pagedlab.grading.sandbox" in _cmdline(p) for p in tree), [_cmdline(p) for p in tree]
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = sorted(set(_processes_in(tmp)) | {p for p in tree if _running(p)})
    for pid in left:  # never leave them running, whatever the assertion says
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert f"stopped by {signal.Signals(sig).name}" in err and "removed 2 temporary folder(s)" in err, err
    assert not left, [(p, _cmdline(p)) for p in left]
    assert not list(tmp.iterdir()), list(tmp.iterdir())
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_missing_kernel_containment_is_a_warning_for_the_instructor():
    from pagedlab.grading.grade import Learner, _say_containment

    said: list[str] = []
    lines = [{"type": "containment", "missing": ["Landlock is not available in this kernel"]}, {"type": "done"}]
    _say_containment(
        [(Learner("a", "a.ipynb"), lines, {}), (Learner("b", "b.ipynb"), [{"type": "done"}], {})], said.append
    )
    assert len(said) == 1 and said[0].startswith("WARNING: learner processes ran without part of their kernel")
    assert "Landlock is not available" in said[0]


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_the_grader_finds_and_kills_a_detached_grandchild():
    """What a driver's descendant left behind (here a shell's background `sleep`, detached when the
    shell exits) becomes the grader's child while it supervises, and is killed and reaped."""
    from pagedlab.containment.reaper import Supervisor, children

    with Supervisor() as sup:
        shell = subprocess.run(["sh", "-c", "sleep 120 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
        orphan = int(shell.stdout.strip())
        for _ in range(100):  # the shell is gone; its child is now ours
            if orphan in children():
                break
            time.sleep(0.05)
        assert orphan in children()
        assert sup.kill_strays() == 1
        assert orphan not in children() and not Path(f"/proc/{orphan}").exists()
