"""The learner process of ``pagedlab grade``: run ONE submission's exercises, write transcripts.

Started by :mod:`pagedlab.grading.grade` as ``python -I -m pagedlab.grading.sandbox job.json`` in
a fresh temporary directory holding copies of the submission's notebooks, with resource limits
(``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, no core files; see :func:`limits_preexec`), a
wall-clock timeout enforced by the parent (which kills the whole process group), a scrubbed
environment, stdin on ``/dev/null``, and its own session.

Order inside this process (the threat model is in ``docs/instructor_guide.md``):

1. read and delete the job file; install the *guard* (a ``sys.addaudithook`` hook) that refuses
   file access outside this directory and the Python installation, deleting or renaming files
   outside it, starting programs, network sockets, signalling other processes, ``ctypes`` loads
   from outside the installation, and ``gc`` object walks;
2. execute the learner's exercise cells (:mod:`pagedlab.grading.extract`), each under a time limit;
3. run the public test drivers on the learner's objects; every transcript is plain data
   (:func:`~pagedlab.grading.recorder.to_plain`) appended as one JSON line to ``result.jsonl``;
4. only then open the hidden-tests folder (the guard lets this one load through), refusing if
   the learner's code left threads or a trace/profile hook behind, and run the hidden drivers.

Verdicts are NOT computed here: the grader's own process compares these transcripts with the
reference transcripts it computes itself. The guard is a guard rail against accidents and casual
cheating, not a security boundary (Python's audit hooks cannot be one); see the guide.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional

__all__ = ["limits_preexec", "main"]


def limits_preexec(memory_mb: int, cpu_s: int, fsize_mb: int = 64) -> Callable[[], None]:
    """A ``preexec_fn`` setting the child's resource limits (Linux/macOS)."""
    def apply() -> None:
        mem = int(memory_mb) * 1024 * 1024
        for lim, val in ((resource.RLIMIT_AS, (mem, mem)),
                         (resource.RLIMIT_CPU, (int(cpu_s), int(cpu_s) + 5)),
                         (resource.RLIMIT_FSIZE, (fsize_mb * 1024 * 1024, fsize_mb * 1024 * 1024)),
                         (resource.RLIMIT_CORE, (0, 0))):
            try:
                resource.setrlimit(lim, val)
            except (ValueError, OSError):  # e.g. RLIMIT_AS unsupported on macOS: the timeout still holds
                pass
    return apply


# --- the guard --------------------------------------------------------------------------------------------
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_FS_EVENTS = {"os.remove", "os.rmdir", "os.rename", "os.replace", "shutil.rmtree", "os.truncate", "os.chmod",
              "os.chown", "os.link", "os.symlink", "os.mkdir", "os.utime", "shutil.move", "shutil.copyfile",
              "shutil.copytree", "os.chflags", "os.lchflags", "os.lchmod", "os.lchown"}
_SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                 "os.forkpty", "pty.spawn", "os.startfile", "_posixsubprocess.fork_exec"}
_NET_EVENTS = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
               "socket.gethostbyname", "socket.__new__"}
_GC_EVENTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents"}


class GuardError(PermissionError):
    """Raised inside the learner's code for an operation the grader does not allow."""


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def install_guard(workdir: str, read_roots: List[str]) -> Dict[str, Any]:
    """Install the audit hook; return its control dict (``{"open_hidden": path or None}``).

    Reads are allowed under ``workdir``, ``read_roots`` (the Python installation and the pagedlab
    package) and a few system paths Python and torch need; writes only under ``workdir``.
    """
    work = os.path.realpath(workdir)
    roots = [os.path.realpath(r) for r in read_roots if r]
    system_read = ["/dev/null", "/dev/urandom", "/dev/random", "/dev/shm", "/proc/self", "/proc/thread-self",
                   f"/proc/{os.getpid()}", "/sys/devices/system/cpu", "/sys/fs/cgroup", "/etc/localtime",
                   "/usr/share/zoneinfo", "/etc/ld.so.cache", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat"]
    control: Dict[str, Any] = {"open_hidden": None}
    me = os.getpid()

    def deny(what: str) -> None:
        raise GuardError(f"pagedlab grade: {what} is not allowed while grading (your code may only use files "
                         "in its own working folder)")

    def real(p: Any) -> str:
        try:
            p = os.fsdecode(p)
        except TypeError:
            return ""
        return os.path.realpath(p if os.path.isabs(p) else os.path.join(os.getcwd(), p))

    def hook(event: str, args: Any) -> None:
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if path is None or isinstance(path, int):
                return
            p = real(path)
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & _WRITE_FLAGS)
            if _under(p, [work]) or p == "/dev/null":
                return
            hidden = control["open_hidden"]
            if not writing and hidden and _under(p, [hidden]):
                return
            if not writing and _under(p, roots + system_read):
                return
            deny(f"{'writing' if writing else 'reading'} {os.fsdecode(path)}")
        elif event in ("os.listdir", "os.scandir"):
            path = args[0] if args else "."
            if isinstance(path, int):
                return
            p = real(path if path is not None else ".")
            hidden = control["open_hidden"]
            if _under(p, [work] + roots + system_read) or (hidden and _under(p, [hidden])):
                return
            deny(f"listing the folder {os.fsdecode(path)}")
        elif event in _FS_EVENTS:
            for a in args[:2]:
                if isinstance(a, (str, bytes, os.PathLike)) and not _under(real(a), [work]):
                    deny(f"{event} on {os.fsdecode(a)}")
        elif event in _SPAWN_EVENTS:
            deny("starting another program")
        elif event in _NET_EVENTS:
            deny("network access")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            target = args[0] if args else None
            if event != "os.kill" or target not in (me, 0):
                deny("signalling another process")
        elif event == "sys.addaudithook":
            deny("adding an audit hook")
        elif event in _GC_EVENTS:
            deny(f"{event}()")
        elif event == "ctypes.dlopen":
            name = args[0] if args else None
            if name is None:
                return  # dlopen(None): the process itself
            if not (isinstance(name, (str, bytes)) and os.path.isabs(os.fsdecode(name))
                    and _under(real(name), roots)):
                deny(f"loading the native library {name!r}")
        elif event in ("ctypes.dlsym", "ctypes.dlsym/handle") and control.get("strict_ctypes"):
            deny("ctypes")

    sys.addaudithook(hook)
    return control


# --- the run ---------------------------------------------------------------------------------------------
class _Out:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", encoding="utf-8")

    def write(self, obj: Dict[str, Any]) -> None:
        try:
            line = json.dumps(obj, ensure_ascii=True, allow_nan=True)
        except (TypeError, ValueError) as e:
            line = json.dumps({"type": "internal", "message": f"unserialisable result: {e}"})
        self.f.write(line + "\n")
        self.f.flush()


def _read_roots() -> List[str]:
    import sysconfig
    import pagedlab
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include"):
        try:
            roots.add(sysconfig.get_path(key))
        except KeyError:
            pass
    roots.add(os.path.dirname(os.path.abspath(pagedlab.__file__)))
    try:  # the kernels folder, found without importing it (that would import torch)
        import importlib.util
        spec = importlib.util.find_spec("pagedlab.kernels")
        for loc in (spec.submodule_search_locations or []) if spec else []:
            roots.add(os.path.abspath(loc))
    except Exception:  # noqa: BLE001 - kernels are optional here
        pass
    for p in sys.path:  # site-packages and the stdlib zip; never the current directory
        if p and os.path.isabs(p) and ("site-packages" in p or "dist-packages" in p or p.startswith(sys.base_prefix)):
            roots.add(p)
    roots.add(sys.base_prefix)
    roots.add(sys.prefix)
    return [r for r in roots if r and r != "/"]


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    job_path = argv[0]
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    os.remove(job_path)
    workdir = os.getcwd()
    out = _Out(os.path.join(workdir, job.get("result", "result.jsonl")))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails instead of killing us

    # Everything the grader needs is imported before the learner's code runs.
    from pagedlab.grading import registry
    from pagedlab.grading.extract import NotebookError, exercise_names, find_exercises, load_exercises, read_notebook
    from pagedlab.grading.runner import run_driver, time_limit

    wanted = job.get("exercises")
    names = exercise_names(wanted)
    test_timeout = float(job.get("test_timeout", 10.0))
    hidden_dir = job.get("hidden_dir")
    sys.dont_write_bytecode = True

    # A. Parse the notebooks (plain JSON; nothing of the learner's runs yet).
    parsed = []
    for nb_name in job["notebooks"]:
        try:
            nb = read_notebook(os.path.join(workdir, nb_name))
        except NotebookError as e:
            out.write({"type": "notebook", "notebook": nb_name, "error": str(e)})
            continue
        ext = find_exercises(nb, names)
        out.write({"type": "notebook", "notebook": nb_name, "found": {eid: c.index for eid, c in ext.cells.items()},
                   "notes": ext.notes})
        parsed.append((nb_name, ext))
    # B. Heavy modules the found exercises' tests need (torch for lab 08), loaded before the guard.
    needs = set()
    for _nb, ext in parsed:
        for eid in ext.cells:
            if eid in names:
                needs |= set(registry.get(eid).needs)
    for mod in sorted(needs):
        try:
            __import__(mod)
        except Exception:  # noqa: BLE001 - the tests will say what is missing
            pass

    # C. The guard, then the learner's code.
    control = install_guard(workdir, _read_roots())

    def limited(fn: Callable[[], Any]) -> Any:
        with time_limit(test_timeout):
            return fn()

    loaded: Dict[str, Any] = {}  # exercise id -> (object, notebook)
    for nb_name, ext in parsed:
        try:
            results = load_exercises(ext, names, run=limited, label=nb_name)
        except BaseException as e:  # noqa: BLE001 - the learner's setup code misbehaved badly
            out.write({"type": "notebook", "notebook": nb_name, "error": f"could not run its cells ({type(e).__name__})"})
            continue
        for eid, le in results.items():
            if eid not in names:
                continue
            if eid in loaded:
                out.write({"type": "note", "exercise": eid,
                           "message": f"{eid} is also in {nb_name}; the one in {loaded[eid][1]} is graded"})
                continue
            flags = []
            if le.ok:
                try:
                    if le.obj is registry.get(eid).get_reference():
                        flags.append("uses the kit's reference implementation (use_reference), not its own code")
                except Exception:  # noqa: BLE001
                    pass
            out.write({"type": "exercise", "exercise": eid, "notebook": nb_name, "ok": le.ok, "error": le.error,
                       "notes": le.notes, "flags": flags})
            if le.ok:
                loaded[eid] = (le.obj, nb_name)

    timed_out: set = set()

    def run_tests(hidden: bool) -> None:
        for eid, (obj, _nb) in loaded.items():
            ex = registry.get(eid)
            for test in ex.tests:
                if test.hidden != hidden:
                    continue
                if eid in timed_out:  # one endless loop per exercise is enough to wait for
                    entries = [{"kind": "error", "type": "TimeoutError", "message": "skipped", "where": "<skipped>"}]
                else:
                    entries = run_driver(test, obj, timeout=min(test.timeout, test_timeout), plain=True,
                                         catch_all=True)
                    if entries and entries[-1].get("where") == "<time limit>":
                        timed_out.add(eid)
                out.write({"type": "transcript", "exercise": eid, "test": test.title, "hidden": hidden,
                           "entries": entries})

    run_tests(hidden=False)
    if hidden_dir:
        problem = None
        if threading.active_count() > 1:
            problem = "your code left background threads running, so the hidden tests were not run"
        sys.settrace(None)
        sys.setprofile(None)
        threading.settrace(None)  # type: ignore[arg-type]
        if problem is None:
            control["open_hidden"] = os.path.realpath(hidden_dir)
            try:
                registry.load_hidden_tests(hidden_dir)
            except Exception as e:  # noqa: BLE001
                problem = f"the hidden tests could not be loaded ({type(e).__name__})"
            finally:
                control["open_hidden"] = None
        if problem:
            out.write({"type": "hidden", "error": problem})
        else:
            run_tests(hidden=True)
    out.write({"type": "done"})
    out.f.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a subprocess
    try:
        rc = main()
    except SystemExit as e:
        rc = int(e.code or 0) if isinstance(e.code, int) else 1
    sys.stdout.flush()
    os._exit(rc)
