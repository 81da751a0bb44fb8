"""The learner's process of ``pagedlab grade``: hold ONE submission's definitions, answer calls.

Started by the driver process (:mod:`pagedlab.grading.driver`) as ``python -I -m
pagedlab.grading.sandbox RFD WFD job.json`` in a fresh temporary directory holding copies of the
submission's notebooks, with resource limits (``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, no
core files; see :func:`pagedlab.containment.limits.limits_preexec`), a scrubbed environment, stdin on ``/dev/null``.

Order inside this process (the threat model is in ``docs/instructor_guide.md``):

1. read and delete the job file; apply Landlock (:func:`pagedlab.containment.kernel.restrict_files`:
   writes only in this folder, reads only in the installation and system folders, no execve, no TCP,
   no signal outside) while the process has one thread;
2. import what the exercises need (torch for lab 08: its uninitialised allocations then hold NaN,
   :mod:`pagedlab.parts.poison`), the kit's grading modules, every extension
   module of the standard library and numpy (:func:`pagedlab.containment.limits.preload_native_modules`): after step 3 no
   library can be loaded;
3. install the seccomp filter (:func:`pagedlab.containment.kernel.deny_syscalls`: no new process,
   program or executable mapping, no signal or ptrace of another process, no socket, no change to a
   file's mode, owner, times or extended attributes, no change to a resource limit or to scheduling);
4. install the *guard* (:mod:`pagedlab.containment.guard`, a ``sys.addaudithook`` hook) that refuses file access outside this
   directory and the Python installation, deleting or renaming files outside it or changing their
   metadata (by path, by descriptor or relative to a folder's descriptor), starting
   programs, changing a resource limit, network sockets, signalling other processes, every ``ctypes``
   operation and ``cffi``,
   and ``gc`` object walks - clear errors for the learner, and defence in depth;
5. execute the learner's exercise cells (:mod:`pagedlab.grading.extract`), each under a time limit;
6. send a *hello* (what loaded, handles of the learner's objects, which containment is missing)
   over the pipe and answer the driver's requests (:mod:`pagedlab.containment.rpc`) until it closes
   the pipe.

For the end-to-end test (job key ``e2e``) the engine and the model's weights are loaded before the
filter (step 3), and the hello carries a handle of an :class:`~pagedlab.grading.e2e_learner.EngineServer`
holding the learner's objects: it serves prompts on them and answers token ids (plain data).

No reference transcript or hidden test is ever in this process, and no driver runs here - with
one exception: an exercise marked ``runs_in_learner_process`` (lab 08's ``@triton.jit`` helper,
which cannot cross the pipe) has its public drivers run here by :class:`_LocalRunner`, and only
their transcripts go back. Everywhere else the drivers run in the driver process and only call
the learner's objects through the pipe. What this process answers is the learner's
implementation speaking (for a local exercise: its own observations); it can lie about nothing
else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import signal
import sys
import sysconfig
from collections.abc import Callable
from typing import Any

import pagedlab
from pagedlab.containment import kernel as contain
from pagedlab.containment.guard import install_guard
from pagedlab.containment.limits import preload_native_modules

__all__ = ["main"]


# --- the run ---------------------------------------------------------------------------------------------
def _read_roots() -> list[str]:
    roots: set[str] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include"):
        with contextlib.suppress(KeyError):
            roots.add(sysconfig.get_path(key))
    roots.add(os.path.dirname(os.path.abspath(pagedlab.__file__)))
    try:  # the kernels folder, found without importing it (that would import torch)
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


#: Folders the learner's process may read besides the Python installation and the kit (Landlock).
SYSTEM_READ_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/etc", "/proc", "/sys", "/dev")


def _landlock_reads(job: dict[str, Any]) -> list[str]:
    """What the kernel lets the learner's process read: the guard's roots, system folders, and the
    model cache for the end-to-end test (its weights are loaded before the guard)."""
    extra = [str(job["e2e"]["cache_dir"])] if job.get("e2e") else []
    return _read_roots() + list(SYSTEM_READ_ROOTS) + extra


#: Loaded before the learner's cells, so that the audit sees what they replace.
_AUDITED = (
    "pagedlab.grading.registry",
    "pagedlab.grading.runner",
    "pagedlab.grading.recorder",
    "pagedlab.grading.judge",
    "pagedlab.grading.extract",
    "pagedlab.grading.references",
    "pagedlab.containment.rpc",
)


def _fingerprint() -> dict[str, int]:
    """``module.name`` (and ``module.Class.name``) -> id of the object, for every loaded pagedlab
    module, and the driver of every registered test."""
    out: dict[str, int] = {}
    reg = sys.modules.get("pagedlab.grading.registry")
    for ex in list(getattr(reg, "_REGISTRY", {}).values()):
        for t in list(ex.tests):
            out[f"registry[{ex.id!r}] test {t.title[:40]!r}.drive"] = id(t.drive)
    for mname, mod in list(sys.modules.items()):
        if not (mname == "pagedlab" or mname.startswith("pagedlab.")) or mod is None:
            continue
        for name, val in list(vars(mod).items()):
            out[f"{mname}.{name}"] = id(val)
            if isinstance(val, type) and val.__module__ == mname:
                for attr, member in list(vars(val).items()):
                    out[f"{mname}.{name}.{attr}"] = id(member)
    return out


class _Audit:
    """Exported to the driver: which of the kit's objects the learner's code replaced."""

    def __init__(self, watch: Any = None) -> None:
        self.before = _fingerprint()
        self._watch = watch  # provenance.RunWatch: which references' code ran

    def forget_calls(self) -> bool:
        """Start a new window of :meth:`reference_ran` (the driver calls it before an exercise's tests);
        whether there is a watch."""
        if self._watch is not None:
            self._watch.forget()
        return self._watch is not None

    def reference_ran(self, exercise_id: str) -> str:
        """The flag of :meth:`pagedlab.grading.provenance.RunWatch.ran` for this window, or ``""``."""
        return self._watch.ran(str(exercise_id)) if self._watch is not None else ""

    def changed(self) -> list[str]:
        """Kit names bound to another object than before the learner's cells ran, and modules in
        ``sys.modules`` under ``pagedlab.`` that are not files of the kit (import-time tricks)."""
        after = _fingerprint()
        out = sorted(k for k, v in self.before.items() if after.get(k, v) != v)

        home = os.path.dirname(os.path.realpath(pagedlab.__file__))
        for mname, mod in list(sys.modules.items()):
            if (
                mname.startswith("pagedlab.")
                and mname != "pagedlab.kernels"
                and not mname.startswith("pagedlab.kernels.")
            ):
                path = getattr(mod, "__file__", None)
                if not isinstance(path, str) or not os.path.realpath(path).startswith(home + os.sep):
                    out.append(f"sys.modules[{mname!r}]")
        return out[:20]


class _LocalRunner:
    """Exported to the driver: run one of the kit's public test drivers HERE, on the learner's object.

    Only for exercises marked ``runs_in_learner_process`` (a ``@triton.jit`` helper cannot cross
    the pipe: the kit's kernels take it as a ``tl.constexpr``). Copies of the tests (so their
    drivers) and ``run_driver`` are taken when this object is made, before any learner cell runs.
    What the learner's code can still change here (the kit's modules the drivers use: recorder,
    kernels, helpers) shapes only its own transcripts of this exercise: the driver process and the
    grader judge them, and the flags report the change. Hidden tests are never here (the registry
    refuses them for such exercises).
    """

    def __init__(self) -> None:
        from pagedlab.grading import registry  # lazy: learner's process: imported in main's order
        from pagedlab.grading.runner import run_driver  # lazy: learner's process: imported in main's order

        self._run_driver = run_driver
        self._tests: dict[tuple[str, str], Any] = {  # copies: patching the registry's tests changes nothing here
            (ex.id, t.title): dataclasses.replace(t)
            for ex in registry.all_exercises()
            if ex.runs_in_learner_process
            for t in ex.public_tests()
        }

    def run(self, exercise_id: str, title: str, obj: Any, timeout: float) -> list[dict[str, Any]]:
        """The plain transcript of test ``title`` of ``exercise_id`` on ``obj`` (``timeout`` in seconds).

        Raises:
            LookupError: no such public test of an exercise that runs in the learner's process.
        """
        test = self._tests.get((str(exercise_id), str(title)))
        if test is None:
            raise LookupError(f"no test {title!r} of {exercise_id} runs in the learner's process")
        return list(self._run_driver(test, obj, timeout=float(timeout), plain=True, catch_all=True))


#: At most this many installed packages a notebook imports are loaded before the filter (:func:`preload_imports`).
MAX_PRELOADED_IMPORTS = 12


def preload_imports(parsed: list[tuple[str, Any]], workdir: str) -> list[str]:
    """Load now, before the filter refuses native code, the installed packages the notebooks import at top
    level (an unused ``import pandas`` works while grading as in the lab): third-party packages only (the
    standard library's native parts are :func:`preload_native_modules`' job), found outside the learner's
    working folder, at most :data:`MAX_PRELOADED_IMPORTS`. Returns those that failed to load (the learner's
    own import then says why)."""
    from pagedlab.grading.extract import imported_modules  # lazy: learner's process: imported in main's order

    wanted = sorted({m for _nb, ext in parsed for m in imported_modules(ext)})
    work = os.path.realpath(workdir) + os.sep
    failed = []
    tried = 0
    for name in wanted:
        if name in sys.modules or name in sys.stdlib_module_names or tried >= MAX_PRELOADED_IMPORTS:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = (spec.origin if spec is not None else None) or ""
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not (origin or locations) or any(os.path.realpath(p).startswith(work) for p in [origin, *locations] if p):
            continue  # not installed, or a file of the learner's folder: its own code runs under the guard
        tried += 1
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - the learner's import will raise (with a clear message)
            failed.append(name)
    return failed


def _parse(workdir: str, notebooks: list[str], names: dict[str, str]) -> list[tuple[str, Any]]:
    """(notebook, extraction) of each notebook that parses (the driver reports the others)."""
    # lazy: learner's process: imported in main's order
    from pagedlab.grading.extract import NotebookError, find_exercises, read_notebook

    parsed = []
    for nb_name in notebooks:
        try:
            parsed.append((nb_name, find_exercises(read_notebook(os.path.join(workdir, nb_name)), names)))
        except NotebookError:
            continue
    return parsed


def _load(
    parsed: list[tuple[str, Any]],
    names: dict[str, str],
    cell_timeout: float,
    chan: Any,
    into: dict[str, Any] | None = None,
    provenance: Any = None,
) -> list[dict[str, Any]]:
    """Run the exercise cells of every notebook; one record per (notebook, exercise) found.

    ``into`` (exercise id -> object) receives the first loaded object of each exercise (the
    end-to-end test's engine plugs them in); ``provenance`` (:class:`~pagedlab.grading.provenance.Provenance`)
    flags an object that is the kit's reference."""
    from pagedlab.grading.extract import load_exercises  # lazy: learner's process: imported in main's order
    from pagedlab.grading.runner import time_limit  # lazy: learner's process: imported in main's order

    def limited(fn: Callable[[], Any]) -> Any:
        with time_limit(cell_timeout):
            return fn()

    records: list[dict[str, Any]] = []
    for nb_name, ext in parsed:
        try:
            results = load_exercises(ext, names, run=limited, label=nb_name)
        except BaseException as e:  # noqa: BLE001 - the learner's setup code misbehaved badly
            records.append({"notebook": nb_name, "error": f"could not run its cells ({type(e).__name__})"})
            continue
        for eid, le in results.items():
            if eid in names:
                if into is not None and le.ok:
                    into.setdefault(eid, le.obj)
                records.append(
                    {
                        "exercise": eid,
                        "notebook": nb_name,
                        "ok": le.ok,
                        "error": le.error,
                        "notes": le.notes,
                        "reference": provenance.check(eid, le.obj) if provenance is not None and le.ok else "",
                        "h": chan.export(le.obj) if le.ok else None,
                    }
                )
    return records


def _draw_local_differential_cases(names: dict[str, str]) -> None:
    """Draw now the cases of the differential tests that run here (:class:`_LocalRunner`): drawing imports
    hypothesis's and numpy's lazy modules, which the filter (step 3) would refuse to map."""
    from pagedlab.grading import differential, registry  # lazy: learner's process: imported in main's order

    for eid in names:
        diff = differential.find(eid)
        if diff is not None and registry.get(eid).runs_in_learner_process:
            diff.cases()


def main(argv: list[str] | None = None) -> int:
    """Load the submission, send the hello, answer the driver until it closes the pipe."""
    from pagedlab.containment.rpc import Channel  # lazy: learner's process: imported in main's order
    from pagedlab.grading.recorder import learner_frame  # lazy: learner's process: imported in main's order

    rfd, wfd, job_path = (list(sys.argv[1:] if argv is None else argv) + ["", "", ""])[:3]
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    os.remove(job_path)
    workdir = os.getcwd()
    # kernel containment, 1: files, network, signals - first, while this process has one thread
    missing = [why for why in [contain.restrict_files(workdir, _landlock_reads(job))] if why]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails instead of killing us
    sys.dont_write_bytecode = True
    names: dict[str, str] = dict(job["names"])
    parsed = _parse(workdir, job["notebooks"], names)
    for mod in sorted(job.get("needs", [])):  # heavy modules the exercises need, loaded before the guard
        try:
            __import__(mod)
        except Exception:  # noqa: BLE001 - the tests will say what is missing
            pass
    preload_imports(parsed, workdir)  # installed packages the notebooks import, before the filter
    if "torch" in job.get("needs", []) and not job.get("e2e"):
        from pagedlab.parts import poison  # lazy: learner's process: imported in main's order, only for torch

        poison.install()  # memory the learner's code allocates and never writes holds NaN, on every run
    server: Any = None
    if job.get("e2e"):  # the end-to-end test: the engine and the model's weights, loaded before the guard
        from pagedlab.grading import e2e_learner  # lazy: imports the engine and torch, for this test only

        e2e_learner.preload(str(job["e2e"]["model"]), str(job["e2e"]["cache_dir"]))
        server = e2e_learner.EngineServer(str(job["e2e"]["model"]))
    for mod in _AUDITED:
        __import__(mod)
    reg = sys.modules["pagedlab.grading.registry"]
    reg.use_course(job.get("course", reg.DEFAULT_COURSE))  # the course the grader serves
    reg.load_all()
    from pagedlab.grading.provenance import Provenance, RunWatch  # lazy: learner's process: imported in main's order

    refs = Provenance(names)  # the references' fingerprints, before any learner cell runs or a guard is on
    watch = RunWatch(refs)  # imports cProfile now, before the filter
    _draw_local_differential_cases(names)
    preload_native_modules()
    # kernel containment, 2: no new process, program or executable memory - every library is loaded now
    missing += [why for why in [contain.deny_syscalls()] if why]
    for why in missing:
        print(f"pagedlab grade: containment incomplete: {why}", file=sys.stderr, flush=True)
    install_guard(workdir, _read_roots())
    chan = Channel(int(rfd), int(wfd), trusted=False, where=learner_frame)
    audit = _Audit(watch)
    local = _LocalRunner()
    records = _load(parsed, names, float(job.get("cell_timeout", 10.0)), chan, server.objects if server else None, refs)
    hello = {"records": records, "audit": chan.export(audit), "local": chan.export(local), "missing": missing}
    if server is not None:
        hello["e2e"] = chan.export(server)
    chan.send({"hello": hello})
    watch.start()
    chan.serve_forever()
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a subprocess
    try:
        rc = main()
    except SystemExit as e:
        rc = int(e.code or 0) if isinstance(e.code, int) else 1
    sys.stdout.flush()
    os._exit(rc)
