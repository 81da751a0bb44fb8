"""The driver process of ``pagedlab grade``: run the test drivers on ONE learner's definitions.

Started by :mod:`pagedlab.grading.grade` as ``python -I -m pagedlab.grading.driver job.json`` in a
grader-owned temporary folder. No learner code ever runs in this process: it starts the learner's
process (:mod:`pagedlab.grading.sandbox`) in a sub-folder, receives handles of the learner's
objects, and runs every test driver HERE on :class:`~pagedlab.containment.rpc.Proxy` objects - each
call into the learner's code is one request over a pipe, answered with plain data. The drivers,
tests, registry, recorders and hidden tests exist only in this process, so nothing the learner's
code does (assignments, monkey-patching, import tricks) can change how it is tested.

One exception, declared per exercise (``Exercise.runs_in_learner_process``: lab 08's
``@triton.jit`` helper, which the kit's kernels take as a ``tl.constexpr`` and so cannot cross
the pipe): the learner's process runs that exercise's public drivers itself and sends back only
the transcripts, which this process checks to be plain data (:func:`_run_in_learner`). The
learner's code can shape its own observations there, nothing else: the reference transcripts,
the comparison and the scores stay in the grader's process, and the other exercises' drivers
still run here. Hidden tests are refused for such exercises (the registry raises).

It writes ``result.jsonl`` (one JSON object a line) in its own folder:

* ``notebook``: per notebook, the exercises found or why it cannot be read;
* ``exercise``: per exercise, whether its cell ran and its object exists, notes, flags;
* ``transcript``: per test, the learner's transcript (recorded here, by the trusted driver);
* ``note`` / ``hidden`` / ``audit``: messages; ``done`` last.

If the learner's process dies or overruns a test's time limit, the test is recorded as such and
a fresh learner process is started for the next one. All public tests run before any hidden one.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import os
import pkgutil
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, TextIO

from pagedlab import grading
from pagedlab.containment.limits import limits_preexec
from pagedlab.containment.rpc import Channel, ChannelClosed
from pagedlab.grading import e2e, e2e_driver, registry
from pagedlab.grading.e2e import E2E_MEMORY_MB
from pagedlab.grading.extract import (
    NotebookError,
    find_exercises,
    read_notebook,
    strip_magics,
)
from pagedlab.grading.provenance import FLAG_PREFIX as REFERENCE_FLAG
from pagedlab.grading.recorder import error_entry, time_limit_entry
from pagedlab.grading.runner import TimeLimitExceeded, run_driver, time_limit
from pagedlab.grading.text import printable

__all__ = ["LearnerProcess", "main", "static_flags"]

#: The modules of pagedlab.grading that notebooks import (``check`` and ``use_reference`` come from the package
#: itself). Every other module of the package is the grader's internals: a learner's exercise cell has no
#: business importing them. Derived from the package, so a new module is flagged without being listed here.
LEARNER_FACING = frozenset({"kit", "plug"})
GRADING_INTERNALS = frozenset(m.name for m in pkgutil.iter_modules(grading.__path__)) - LEARNER_FACING
#: Packages outside pagedlab.grading whose every module is the grader's too: the containment layer, and the
#: course's exercise definitions (:func:`registry.course_module`: their tests and references).
INTERNAL_PACKAGES = ("pagedlab.containment",)
_REFERENCE_CALLS = frozenset({"use_reference", "components"})
#: Time limits here are this many times a test's own (check()'s): every call into the learner's
#: code, and every attribute the driver reads from its objects, crosses processes (~0.1 ms each) and,
#: in the learner's process, the containment guard's audit hook. 3x was not enough on a fresh-clone CI
#: run of this stop (07.insert's random test passed 30 s at step 48; 96 s for every exercise alone):
#: the limits are there to stop infinite loops, which 5x still does.
RPC_SLACK = 5.0


# --- static flags ---------------------------------------------------------------------------------------
def _internal(dotted: str) -> bool:
    """``pagedlab.grading.registry`` or anything inside it (a grader module, not the learner-facing kit), or a
    module of :data:`INTERNAL_PACKAGES`."""
    parts = dotted.split(".")
    if len(parts) >= 3 and parts[:2] == ["pagedlab", "grading"] and parts[2] in GRADING_INTERNALS:
        return True
    return any(dotted == p or dotted.startswith(p + ".") for p in (*INTERNAL_PACKAGES, registry.course_module()))


def _kit_aliases(sources: list[str]) -> set[str]:
    """Names bound, in any of ``sources``, to a pagedlab module (``import pagedlab.x as y``) or to
    a grader module or anything imported from one (``from pagedlab.grading import registry``,
    ``from pagedlab.grading.recorder import Recorder``) - not the kit's learner-facing classes."""
    out: set[str] = set()
    for src in sources:
        try:
            tree = ast.parse(strip_magics(src))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("pagedlab")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pagedlab"):
                out |= {
                    a.asname or a.name
                    for a in node.names
                    if node.module == "pagedlab" or _internal(f"{node.module}.{a.name}")
                }
    return out


def _import_flags(node: ast.AST, ex_name: str) -> list[str]:
    mods: list[str] = []
    if isinstance(node, ast.Import):
        mods = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pagedlab"):
        mods = [f"{node.module}.{a.name}" for a in node.names]
        if any(a.name == ex_name for a in node.names):
            return [f"imports the kit's own {ex_name} from {node.module} (the reference implementation)"]
    inside = [".".join(m.split(".")[:3]) for m in mods if _internal(m)]
    return [f"imports the grader's internals ({inside[0]})"] if inside else []


def static_flags(source: str, ex_name: str, aliases: set[str]) -> list[str]:
    """What an exercise cell does that a solution should not (for the instructor's report).

    Flags: importing the kit's reference of the exercise or the grader's internals; calling
    ``use_reference``; assigning to (or ``setattr`` on) anything imported from pagedlab
    (``aliases``: see :func:`_kit_aliases`). A cell that does not parse has no flags.
    """
    try:
        tree = ast.parse(strip_magics(source))
    except SyntaxError:
        return []
    flags: list[str] = []
    aliases = _derived_aliases(tree, aliases | _kit_aliases([source]))
    for node in ast.walk(tree):
        flags += _import_flags(node, ex_name)
        if isinstance(node, ast.Call):
            fn = node.func
            called = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if called in _REFERENCE_CALLS:
                flags.append("uses the kit's reference implementation (use_reference), not its own code")
            elif called in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                flags += _import_flags(ast.Import(names=[ast.alias(name=str(node.args[0].value))]), ex_name)
            elif called in ("setattr", "delattr") and node.args and _root(node.args[0]) in aliases:
                flags.append(f"{called} on the kit's objects ({ast.unparse(node.args[0])[:60]})")
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        for t in targets:
            text = ast.unparse(t)
            if isinstance(t, (ast.Attribute, ast.Subscript)) and _root(t) in aliases:
                flags.append(f"assigns to the kit's objects ({text[:60]} = ...)")
            elif text.startswith(("sys.modules", "builtins.")):
                flags.append(f"replaces modules or builtins ({text[:60]} = ...)")
    return list(dict.fromkeys(flags))[:5]


def _root(node: ast.AST) -> str:
    """``registry`` for ``registry.get("x").tests[0]`` (through attributes, items and calls)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _bound_names(target: ast.AST) -> set[str]:
    """Plain names a target binds (``a``, ``a, b``), not ``self`` of ``self.x = ...``."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for e in target.elts for n in _bound_names(e)}
    return set()


def _derived_aliases(tree: ast.AST, aliases: set[str]) -> set[str]:
    """``aliases`` plus names bound from them (``ex = registry.get(...)``, ``for t in ex.tests``)."""
    out = set(aliases)
    for _ in range(3):  # a few rounds reach chains of assignments
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _root(node.value) in out:
                out |= {n for t in node.targets for n in _bound_names(t)}
            elif isinstance(node, (ast.For, ast.comprehension)) and _root(node.iter) in out:
                out |= _bound_names(node.target)
    return out


# --- the learner's process ------------------------------------------------------------------------------
def describe_exit(rc: int | None) -> str:
    """Why the learner's process ended, in the learner's terms."""
    if rc is None:
        return "the process running your code stopped answering"
    if rc < 0:
        names: dict[int, str] = {
            signal.SIGKILL: "was killed (memory limit?)",
            signal.SIGSEGV: "crashed (segmentation fault)",
            signal.SIGABRT: "aborted",
            signal.SIGXCPU: "ran out of CPU time",
            signal.SIGBUS: "crashed (bus error)",
        }
        return f"the process running your code {names.get(-rc, f'was killed by signal {-rc}')}"
    return f"the process running your code exited with status {rc} (did your code call os._exit or sys.exit?)"


class LearnerProcess:
    """The learner's process (restartable) and the proxies of its exercise objects."""

    def __init__(self, job: dict[str, Any], names: dict[str, str], e2e: dict[str, Any] | None = None) -> None:
        self.job, self.names, self.e2e_job = job, names, e2e
        self.time_scale = float(job.get("time_scale", 1.0))  # $PAGEDLAB_GRADE_TIME_SCALE (grade.time_scale)
        self.pristine = os.path.realpath(job["learner_dir"])  # the grader's copies; the learner never writes here
        self.workdir = ""  # this process's own scratch folder (a fresh one per start)
        self.missing: list[str] = []  # kernel containment the learner's process could not apply
        self.proc: subprocess.Popen[bytes] | None = None
        self.chan: Channel | None = None
        self.objects: dict[str, Any] = {}
        self.audit: Any = None
        self.local: Any = None
        self.e2e: Any = None  # the EngineServer of an end-to-end process
        self.records: list[dict[str, Any]] = []

    def _fresh_folder(self) -> None:
        """A new scratch folder holding fresh copies of the notebooks: no process sees what an earlier
        one wrote (the hidden tests' run leaves nothing for the end-to-end test)."""
        self.workdir = tempfile.mkdtemp(prefix="learner-", dir=os.path.dirname(self.pristine))
        for nb in self.job["notebooks"]:
            shutil.copyfile(os.path.join(self.pristine, nb), os.path.join(self.workdir, nb))

    def start(self) -> str:
        """Start the process in a fresh folder and wait for its hello; return "" or why it failed."""
        self.stop()
        self._fresh_folder()
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        with open(os.path.join(self.workdir, "job.json"), "w", encoding="utf-8") as f:
            json.dump(
                {
                    "names": self.names,
                    "course": registry.course_module(),
                    "notebooks": self.job["notebooks"],
                    "needs": self.job["needs"],
                    "cell_timeout": self.job["test_timeout"],
                    "e2e": {k: self.e2e_job[k] for k in ("model", "cache_dir")} if self.e2e_job else None,
                },
                f,
            )
        memory_mb = max(self.job["memory_mb"], E2E_MEMORY_MB) if self.e2e_job else self.job["memory_mb"]
        env = dict(os.environ, HOME=self.workdir, TMPDIR=self.workdir, MPLCONFIGDIR=self.workdir)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "pagedlab.grading.sandbox", str(r1), str(w2), "job.json"],
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            pass_fds=(r1, w2),
            close_fds=True,
            preexec_fn=limits_preexec(memory_mb, self.job["cpu_s"]),
        )
        os.close(r1)
        os.close(w2)
        self.chan = Channel(r2, w1, trusted=True)
        try:
            with time_limit(30.0 + self.job["test_timeout"] * (2 + len(self.names))):
                hello = self.chan.recv().get("hello")
            self._take_hello(hello)
        except (ChannelClosed, TimeLimitExceeded, ValueError, TypeError, KeyError) as e:
            self.stop()
            return (
                describe_exit(self.proc.returncode)
                if isinstance(e, ChannelClosed)
                else "the notebook's cells did not load in time"
                if isinstance(e, TimeLimitExceeded)
                else "the process running your code sent nonsense"
            )
        return ""

    def _take_hello(self, hello: Any) -> None:
        assert self.chan is not None
        if not isinstance(hello, dict) or not isinstance(hello.get("records"), list):
            raise ValueError("no hello")
        self.records = [r for r in hello["records"] if isinstance(r, dict)]
        missing = hello.get("missing")
        self.missing = [str(m)[:300] for m in missing][:5] if isinstance(missing, list) else ["(not reported)"]
        self.missing += self._seccomp_seen()
        self.objects = {}
        for r in self.records:
            eid, h = r.get("exercise"), r.get("h")
            if r.get("ok") and isinstance(h, int) and eid in self.names and eid not in self.objects:
                self.objects[str(eid)] = self.chan.decode({"t": "ref", "h": h, "cls": self.names[str(eid)]})
        if isinstance(hello.get("audit"), int):
            self.audit = self.chan.decode({"t": "ref", "h": hello["audit"], "cls": "audit"})
        if isinstance(hello.get("local"), int):
            self.local = self.chan.decode({"t": "ref", "h": hello["local"], "cls": "local runner"})
        if isinstance(hello.get("e2e"), int):
            self.e2e = self.chan.decode({"t": "ref", "h": hello["e2e"], "cls": "engine server"})

    def _seccomp_seen(self) -> list[str]:
        """What the kernel says of the learner's process (not what it says of itself): its seccomp mode."""
        assert self.proc is not None
        try:
            with open(f"/proc/{self.proc.pid}/status", encoding="ascii", errors="replace") as f:
                mode = next((ln.split()[1] for ln in f if ln.startswith("Seccomp:")), "")
        except OSError:
            return []  # not Linux, or gone: the hello's report stands
        return (
            []
            if mode in ("", "2")
            else [f"the kernel reports no seccomp filter on the learner's process (Seccomp: {mode})"]
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.chan is not None and not self.chan.closed

    def stop(self) -> None:
        """Kill the process (if running), close the pipes, remove its scratch folder."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        if self.chan is not None:
            for fd in (self.chan.rfd, self.chan.wfd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.chan.closed = True
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = ""


# --- running the tests ----------------------------------------------------------------------------------
def _write(out: TextIO, obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj, ensure_ascii=True) + "\n")
    out.flush()


def _notebooks(job: dict[str, Any], names: dict[str, str], out: TextIO) -> dict[str, Any]:
    """Parse each notebook (plain JSON, here); write its ``notebook`` line; return the parsed ones."""
    parsed: dict[str, Any] = {}
    for nb_name in job["notebooks"]:
        try:
            ext = find_exercises(read_notebook(os.path.join(job["learner_dir"], nb_name)), names)
        except NotebookError as e:
            _write(out, {"type": "notebook", "notebook": nb_name, "error": str(e)})
            continue
        _write(
            out,
            {
                "type": "notebook",
                "notebook": nb_name,
                "notes": ext.notes,
                "found": {eid: c.index for eid, c in ext.cells.items()},
            },
        )
        parsed[nb_name] = ext
    return parsed


def _exercises(lp: LearnerProcess, parsed: dict[str, Any], out: TextIO) -> list[str]:
    """Write one ``exercise`` line per exercise (the first notebook where it loads wins); return the loaded ids."""
    graded: dict[str, str] = {}
    aliases = {
        nb: _kit_aliases([s for _i, s in ext.other_cells] + [c.source for c in ext.cells.values()])
        for nb, ext in parsed.items()
    }
    for r in lp.records:
        eid, nb = str(r.get("exercise", "")), str(r.get("notebook", ""))
        if "error" in r and "exercise" not in r:
            _write(out, {"type": "notebook", "notebook": nb, "error": str(r["error"])[:300]})
            continue
        if eid not in lp.names or nb not in parsed:
            continue
        if eid in graded:
            _write(out, {"type": "note", "message": f"{eid} is also in {nb}; the one in {graded[eid]} is graded"})
            continue
        cell = parsed[nb].cells.get(eid)
        flags = static_flags(cell.source, lp.names[eid], aliases[nb]) if cell is not None else []
        if isinstance(r.get("reference"), str) and r["reference"]:  # provenance.Provenance, in the learner's process
            flags.insert(0, r["reference"][:300])
        _write(
            out,
            {
                "type": "exercise",
                "exercise": eid,
                "notebook": nb,
                "ok": bool(r.get("ok")),
                "error": str(r.get("error", ""))[:2000],
                "flags": flags,
                "notes": [str(n)[:500] for n in r.get("notes", [])][:20] if isinstance(r.get("notes"), list) else [],
            },
        )
        if r.get("ok"):
            graded[eid] = nb
    return list(graded)


def _run_one(lp: LearnerProcess, eid: str, test: Any, timeout: float) -> list[dict[str, Any]]:
    """One test's transcript; restarts the learner's process when the test killed or hung it."""
    if not lp.alive() or eid not in lp.objects:
        why = lp.start() if not lp.alive() else ""
        if why or eid not in lp.objects:
            return [error_entry("ProcessEnded", why or "your exercise cell did not load again in a fresh process")]
    limit = min(RPC_SLACK * test.timeout * lp.time_scale, timeout)
    if registry.get(eid).runs_in_learner_process:
        entries = _run_in_learner(lp, eid, test, limit)
    else:
        entries = run_driver(test, lp.objects[eid], timeout=limit, plain=True, catch_all=True)
    if lp.chan is not None and lp.chan.closed:
        lp.stop()
        if entries and entries[-1].get("kind") == "error":
            entries[-1] = error_entry("ProcessEnded", describe_exit(lp.proc.returncode if lp.proc else None))
    elif entries and entries[-1].get("where") == "<time limit>":
        lp.stop()  # it is still running the learner's loop
    return entries


_ENTRY_KINDS = frozenset({"step", "obs", "state", "fail", "error", "end"})


def _plain(v: Any, depth: int = 0) -> Any:
    """``v`` if it is JSON data (tuples become lists), else raise ``ValueError``."""
    if v is None or type(v) in (bool, int, float, str):
        return v
    if depth < 100 and type(v) in (list, tuple):
        return [_plain(x, depth + 1) for x in v]
    if depth < 100 and type(v) is dict and all(type(k) is str for k in v):
        return {k: _plain(x, depth + 1) for k, x in v.items()}
    raise ValueError(f"a {type(v).__name__} in a transcript")


def _learner_transcript(got: Any) -> list[dict[str, Any]]:
    """The transcript the learner's process sent, checked to be plain entries of known kinds.

    Raises:
        ValueError: anything else (a handle, a set, an unknown kind...).
    """
    if type(got) is not list or not all(type(e) is dict and e.get("kind") in _ENTRY_KINDS for e in got):
        raise ValueError("not a list of transcript entries")
    return [_plain(e) for e in got]


def _run_in_learner(lp: LearnerProcess, eid: str, test: Any, limit: float) -> list[dict[str, Any]]:
    """One test of a ``runs_in_learner_process`` exercise: the learner's process runs the kit's driver
    there (its object cannot cross the pipe) and sends the transcript back as plain data. This
    process only checks its shape; the grader judges it against the reference it computes itself."""
    try:
        with time_limit(limit + 5.0):  # the learner's process enforces ``limit`` itself; this is the backstop
            got = lp.local.run(eid, test.title, lp.objects[eid], limit)
    except TimeLimitExceeded:
        return [time_limit_entry(limit)]
    except BaseException as e:  # noqa: BLE001 - ChannelClosed included: _run_one says why the process ended
        why = f"the kit's test could not run in the process running your code: {str(e)[:500]}"
        return [error_entry(type(e).__name__, why)]
    try:
        return _learner_transcript(got)
    except ValueError as e:
        return [error_entry("ProtocolError", f"the process running your code sent a malformed transcript ({e})")]


def _run_tests(
    lp: LearnerProcess,
    loaded: list[str],
    hidden: bool,
    timeout: float,
    out: TextIO,
    timed_out: set[str],
    keep: dict[tuple[str, str], Any] | None = None,
) -> None:
    """Run the (public or hidden) tests of ``loaded``; write a ``transcript`` line each; ``keep``
    receives ``(exercise id, title) -> transcript``."""
    for eid in loaded:
        watched = not registry.get(eid).runs_in_learner_process and _ask_audit(lp, "forget_calls") is True
        for test in registry.get(eid).tests:
            if test.hidden != hidden:
                continue
            started = time.monotonic()
            if eid in timed_out:  # one endless loop per exercise is enough to wait for
                entries = [error_entry("TimeoutError", "skipped", "<skipped>")]
            else:
                entries = _run_one(lp, eid, test, timeout)
                if entries and entries[-1].get("where") == "<time limit>":
                    timed_out.add(eid)
            seconds = round(time.monotonic() - started, 3)  # for the instructor (why a hidden test failed)
            _write(
                out,
                {
                    "type": "transcript",
                    "exercise": eid,
                    "test": test.title,
                    "hidden": hidden,
                    "entries": entries,
                    "seconds": seconds,
                },
            )
            if keep is not None:
                keep[(eid, test.title)] = entries
        flag = _ask_audit(lp, "reference_ran", eid) if watched else ""
        if isinstance(flag, str) and flag.startswith(REFERENCE_FLAG):
            _write(out, {"type": "reference", "exercise": eid, "flag": flag[:300]})


def _ask_audit(lp: LearnerProcess, method: str, *args: Any) -> Any:
    """``lp.audit.<method>(*args)``, or None when the learner's process is gone or does not answer in 5 s."""
    if not lp.alive() or lp.audit is None:
        return None
    try:
        with time_limit(5.0):
            return getattr(lp.audit, method)(*args)
    except BaseException:  # noqa: BLE001 - the learner's process answers for itself; no answer, no flag
        return None


def _audit(lp: LearnerProcess, out: TextIO) -> None:
    """Ask the learner's process which kit objects its code replaced (a flag; it earns nothing anyway)."""
    if not lp.alive() or lp.audit is None:
        return
    try:
        with time_limit(5.0):
            changed = lp.audit.changed()
    except BaseException:  # noqa: BLE001 - a broken audit is itself suspicious, but not our verdict
        changed = ["(the check could not run)"]
    if isinstance(changed, list) and changed:
        _write(out, {"type": "audit", "changed": [str(c)[:120] for c in changed][:20]})


def run_job(job: dict[str, Any], out: TextIO) -> None:
    """Everything the driver does for one learner (see the module docstring)."""
    course = {ex.id: ex.name for ex in registry.all_exercises()}
    wanted = set(job["exercises"] if job.get("exercises") is not None else course)
    parsed = _notebooks(job, course, out)  # the whole course: an unselected exercise is not a stranger
    found = {eid for ext in parsed.values() for eid in ext.cells if eid in course and eid in wanted}
    names = {eid: course[eid] for eid in sorted(found)}
    job["needs"] = sorted({m for eid in names for m in registry.get(eid).needs})
    lp = LearnerProcess(job, names)
    why = lp.start() if parsed else ""
    if why:
        for eid in names:
            _write(
                out,
                {
                    "type": "exercise",
                    "exercise": eid,
                    "notebook": "",
                    "ok": False,
                    "error": f"your notebook's cells could not be loaded: {why}",
                },
            )
    if lp.missing:  # the instructor is told (the grader prints it); the guard and the limits still hold
        _write(out, {"type": "containment", "missing": lp.missing})
    loaded = _exercises(lp, parsed, out)
    timed_out: set[str] = set()
    local = [eid for eid in loaded if registry.get(eid).runs_in_learner_process]
    public: dict[tuple[str, str], Any] = {}
    _run_tests(lp, [eid for eid in loaded if eid not in local], False, job["test_timeout"], out, timed_out, public)
    _audit(lp, out)  # before the local drivers run: they fill the kit's lazy state there (lab 08's kernels)
    _run_tests(lp, local, False, job["test_timeout"], out, timed_out, public)
    if job.get("hidden_dir"):
        registry.load_hidden_tests(job["hidden_dir"])
        _run_tests(lp, loaded, True, job["test_timeout"], out, timed_out)
    lp.stop()
    _write(out, {"type": "done"})  # the tests are done: the end-to-end test has its own time after them
    if job.get("e2e"):
        _end_to_end(job, names, public, out)


def _end_to_end(job: dict[str, Any], names: dict[str, str], public: dict[tuple[str, str], Any], out: TextIO) -> None:
    """The end-to-end test (:mod:`pagedlab.grading.e2e`): the parts whose public tests all passed,
    plugged into the engine in a fresh learner process; one ``e2e`` line per configuration."""
    parts = [eid for eid in e2e_driver.passed_parts(public) if eid in names]
    if not parts:
        return
    planned = [c["name"] for c, _used in e2e_driver.configs_for(parts, job["e2e"]["configs"])]
    _write(out, {"type": "e2e_start", "parts": e2e_driver.slots_of(parts), "configs": planned})
    lp = LearnerProcess(job, {eid: names[eid] for eid in parts}, job["e2e"])
    why = lp.start()
    if why or lp.e2e is None:
        failed = e2e.no_tokens(f"the engine could not be started with your parts: {why or 'no engine'}", fatal=True)
        _write(out, {"type": "e2e", "config": "default", "parts": e2e_driver.slots_of(parts), **failed, "blame": ""})
        lp.stop()
        return
    try:
        server = _WithheldTextServer(lp.e2e, set(e2e_driver.slots_of(parts)), set(names))
        for line in e2e_driver.run_e2e(server, parts, job["e2e"], float(job["e2e"].get("limit", 60.0))):
            _write(out, line)
    finally:
        lp.stop()


# --- the end-to-end run's text: kept out of learner-facing files ----------------------------------------
_BUILTIN_ERRORS = frozenset(
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
) | {"ComponentError", "KernelInputError"}
_NUM = r"[0-9]+(?:\.[0-9]+)?"
#: Sentences of the engine's guards and of the engine server with only numbers in them: shown as they are.
_KNOWN_SENTENCES = tuple(
    re.compile(p)
    for p in (
        rf"it did not return within {_NUM} s \(an endless loop\?\)",
        rf"it took {_NUM} s, over the {_NUM} s limit \(a bare except: around a loop swallows the time-limit signal\)",
        rf"the engine did not finish within {_NUM} s \(an endless loop\?\)",
    )
)
_RAISED = re.compile(r"(it|the engine) raised ([A-Za-z_][A-Za-z0-9_]*):")
WITHHELD = "its message is kept out of this report: text from the end-to-end run goes to your instructor only"


def withheld_error(err: dict[str, Any], slots: set[str], eids: set[str]) -> dict[str, Any]:
    """A learner process's end-to-end error with every piece of its text replaced by the grader's own.

    The end-to-end run shows learners no text of their process (it could carry what an earlier
    run saw): kept are a component that is one of ``slots``, an int step, the name of a builtin
    exception, the engine's few sentences that hold only numbers; the rest is a fixed sentence.
    """
    out: dict[str, Any] = {k: err[k] for k in ("step", "fatal") if type(err.get(k)) is int}
    component = err.get("component")
    if isinstance(component, str) and component in slots:
        out["component"] = component
    said = str(err.get("invariant") or err.get("message") or "")
    raised = _RAISED.match(said)
    if any(p.fullmatch(said) for p in _KNOWN_SENTENCES):
        text = said
    elif raised and raised.group(2) in _BUILTIN_ERRORS:
        text = f"{raised.group(1)} raised {raised.group(2)} ({WITHHELD})"
    elif said.startswith("not loaded in this process: ") and set(said.split(": ", 1)[1].split(", ")) <= eids:
        text = said
    else:
        text = f"{'an invariant the engine checks failed' if 'component' in out else 'the engine stopped'} ({WITHHELD})"
    out["message"] = text
    if "invariant" in err:
        out["invariant"] = text
    return out


class _WithheldTextServer:
    """The learner process's engine server as the end-to-end run sees it: replies with their text
    replaced (:func:`withheld_error`); the original text goes to this process's output, which is
    the instructor's log."""

    def __init__(self, server: Any, slots: set[str], eids: set[str]) -> None:
        self.server, self.slots, self.eids = server, slots, eids

    def serve(self, *args: Any) -> Any:
        got = self.server.serve(*args)
        if type(got) is not dict:
            return got
        err, table = got.get("error"), got.get("table")
        if type(err) is dict:
            print(f"end-to-end, the learner's process said: {printable(repr(err))[:3000]}", flush=True)
            got = dict(got, error=withheld_error(err, self.slots, self.eids))
        if type(table) is str:
            got = dict(got, table="")
        return got


def main(argv: list[str] | None = None) -> int:
    """``python -I -m pagedlab.grading.driver job.json`` (cwd: the driver's folder)."""
    args = list(sys.argv[1:] if argv is None else argv)
    with open(args[0], encoding="utf-8") as f:
        job = json.load(f)
    registry.use_course(job.get("course", registry.DEFAULT_COURSE))  # the course the grader serves
    with open(job.get("result", "result.jsonl"), "a", encoding="utf-8") as out:
        run_job(job, out)
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a subprocess
    sys.exit(main())
