"""Pull a learner's exercise implementations out of a notebook and execute them, without running
the rest of the notebook.

Convention (the labs follow it; ``pagedlab labs build`` keeps it): an exercise cell is a code cell
whose **first non-empty line** is ``# EXERCISE <id>`` (e.g. ``# EXERCISE 02.free_queue``), or whose
metadata has ``pagedlab.exercise = "<id>"``. The cell holds everything the exercise needs: its
imports, helper functions and constants, and the definition of the learner-facing name.
``check(...)`` goes in the next cell.

What gets executed, in a fresh namespace, in notebook order:

1. *setup*: from every other code cell, only the top-level ``import`` statements, ``def``/``class``
   definitions and literal constants (``BLOCK_SIZE = 16``) that the exercise cells use (by name,
   transitively). Nothing else of the notebook runs: no model loading, no widgets, no plots. An
   import that fails is a warning, not an error.
2. each exercise cell, without its top-level expression statements and ``assert``s (the learner's
   own quick checks and ``check(...)`` calls) and without IPython magics (``%``, ``!`` lines).

Robustness: a cell that does not parse, or raises (even ``SystemExit``), is reported for that
exercise only; the others still run. A notebook whose marker line was deleted is still searched for
a top-level definition of each exercise's name. A cell marked for one exercise that does not define
its name (a renamed function) is reported with the names it does define.
"""

from __future__ import annotations

import ast
import json
import linecache
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagedlab.grading import registry

__all__ = [
    "NotebookError",
    "ExerciseCell",
    "Extraction",
    "LoadedExercise",
    "read_notebook",
    "cell_source",
    "find_exercises",
    "load_exercises",
    "MARKER_RE",
    "marker_id",
    "MAX_NOTEBOOK_BYTES",
]

#: ``# EXERCISE 02.free_queue`` (case-insensitive; ``#EXERCISE:`` also accepted).
MARKER_RE = re.compile(r"^\s*#\s*EXERCISE\b[:\s]*([0-9]{2}\.[A-Za-z0-9_]+)", re.IGNORECASE)
#: Larger notebooks are refused (a lab with outputs is well under 10 MB).
MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024


class NotebookError(ValueError):
    """The file cannot be read as a Jupyter notebook; the message says why, for the learner."""


@dataclass
class ExerciseCell:
    exercise: str
    index: int  #: cell number in the notebook (0-based)
    source: str
    found_by: str  #: "marker", "metadata" or "name"


@dataclass
class Extraction:
    """What :func:`find_exercises` found in one notebook."""

    cells: dict[str, ExerciseCell] = field(default_factory=dict)
    other_cells: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class LoadedExercise:
    """One exercise after execution: the learner's object, or why there is none."""

    exercise: str
    obj: Any = None
    error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.obj is not None and not self.error


def read_notebook(path: Any) -> dict[str, Any]:
    """Parse a notebook file (nbformat 4) as plain JSON.

    Raises:
        NotebookError: not readable, too large, not JSON, not a notebook, or nbformat < 4.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise NotebookError(f"cannot read the file ({e.strerror or e})") from e
    if size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(
            f"the file is {size / 1e6:.0f} MB; notebooks over {MAX_NOTEBOOK_BYTES // 2**20} MB are "
            "refused (clear the outputs and save again)"
        )
    try:
        raw = p.read_bytes()
        text = raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise NotebookError(f"the file is not a text notebook ({type(e).__name__})") from e
    try:
        nb = json.loads(text)
    except ValueError as e:
        raise NotebookError(
            f"the file is not valid JSON, so it is not a notebook ({e}); was it saved from Jupyter, "
            "or renamed from another kind of file?"
        ) from e
    if not isinstance(nb, dict) or ("cells" not in nb and "worksheets" not in nb):
        raise NotebookError("the file is JSON but not a Jupyter notebook (it has no 'cells')")
    if "worksheets" in nb or int(nb.get("nbformat", 4) or 4) < 4:
        raise NotebookError("this is an old-format notebook (nbformat 3); open it in Jupyter and save it again")
    if not isinstance(nb.get("cells"), list):
        raise NotebookError("the notebook's 'cells' is not a list")
    return nb


def cell_source(cell: dict[str, Any]) -> str:
    """A notebook cell's source as one string (nbformat allows a string or a list of lines)."""
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def marker_id(src: str) -> str | None:
    """The id of a cell's ``# EXERCISE <id>`` line, which must be its first non-empty line (None: no marker)."""
    m = MARKER_RE.match(next((line for line in src.splitlines() if line.strip()), ""))
    return m.group(1) if m else None


def _marker(cell: dict[str, Any], src: str) -> tuple[str | None, str]:
    eid = marker_id(src)
    if eid is not None:
        return eid, "marker"
    meta = cell.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("pagedlab"), dict):
        eid = meta["pagedlab"].get("exercise")
        if isinstance(eid, str) and re.fullmatch(r"[0-9]{2}\.[A-Za-z0-9_]+", eid):
            return eid, "metadata"
    return None, ""


def strip_magics(src: str) -> str:
    """Replace IPython magic / shell lines (``%x``, ``%%x``, ``!cmd``) by ``pass``-equivalent blanks."""
    out = []
    for line in src.splitlines():
        s = line.lstrip()
        out.append("" if s.startswith(("%", "!")) else line)
    return "\n".join(out) + ("\n" if src.endswith("\n") else "")


def _defined_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def find_exercises(nb: dict[str, Any], names: dict[str, str]) -> Extraction:  # noqa: C901 - one branch per notebook cell marker
    """Locate the exercise cells of ``nb``.

    Args:
        nb: parsed notebook.
        names: exercise id -> learner-facing name (to find cells whose marker line was deleted).
    """
    ext = Extraction()
    by_name = {v: k for k, v in names.items()}
    unmarked_defs: dict[str, tuple[int, str]] = {}
    for i, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell_source(cell)
        eid, how = _marker(cell, src)
        if eid is not None:
            if eid in ext.cells:
                ext.notes.append(
                    f"exercise {eid} appears in cells {ext.cells[eid].index} and {i}; the last one (cell {i}) is graded"
                )
            if eid not in names:
                ext.notes.append(f"cell {i} is marked '# EXERCISE {eid}', which is not an exercise of this course")
            ext.cells[eid] = ExerciseCell(eid, i, src, how)
            continue
        ext.other_cells.append((i, src))
        try:
            tree = ast.parse(strip_magics(src))
        except SyntaxError:
            continue
        for n in _defined_names(tree):
            if n in by_name:
                unmarked_defs[by_name[n]] = (i, src)
    for eid, (i, src) in unmarked_defs.items():
        if eid not in ext.cells:
            ext.cells[eid] = ExerciseCell(eid, i, src, "name")
            ext.other_cells = [(j, s) for j, s in ext.other_cells if j != i]
            ext.notes.append(
                f"found {names[eid]} in cell {i}, which has no '# EXERCISE {eid}' first line "
                "(graded anyway; keep the marker line to be safe)"
            )
    ext.cells = dict(sorted(ext.cells.items(), key=lambda kv: kv[1].index))
    return ext


# --- execution ------------------------------------------------------------------------------------------
def _used_names(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            base: ast.expr = node
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
    return out


def _binds(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _literal(node: ast.expr | None) -> bool:
    if node is None:
        return False
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _setup_statements(other_cells: Sequence[tuple[int, str]], needed: set[str]) -> list[tuple[int, ast.stmt, str]]:
    """Top-level imports/defs/literal constants of other cells that define names in ``needed`` (closure)."""
    candidates: list[tuple[int, ast.stmt, str]] = []
    for idx, src in other_cells:
        try:
            tree = ast.parse(strip_magics(src))
        except SyntaxError:
            continue
        for node in tree.body:
            ok = isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            ok = ok or (isinstance(node, ast.Assign) and _literal(node.value))
            ok = ok or (isinstance(node, ast.AnnAssign) and _literal(node.value))
            if ok and _binds(node):
                candidates.append((idx, node, src))
    chosen: dict[int, tuple[int, ast.stmt, str]] = {}
    want = set(needed)
    changed = True
    while changed:
        changed = False
        for k, (idx, node, src) in enumerate(candidates):
            if k in chosen or not (set(_binds(node)) & want):
                continue
            chosen[k] = (idx, node, src)
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                more = _used_names(node) - want
                if more:
                    want |= more
                    changed = True
    return [chosen[k] for k in sorted(chosen)]


def _register_source(filename: str, src: str) -> None:
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)


#: ``run(fn)`` calls ``fn()`` (e.g. under a time limit) and lets its exceptions through.
Runner = Callable[[Callable[[], None]], object]


def _runs(node: ast.stmt) -> bool:
    """Whether a top-level statement of an exercise cell runs when the grader loads it: all do except asserts
    (a learner's own spot checks), ``check(...)`` calls (the kit's tests, run by the grader anyway) and bare
    names or constants (the cell's displayed value, no effect). A call such as ``setattr(Cls, "m", f)`` or
    ``Cls.register(x)`` runs, as it does in the notebook."""
    if isinstance(node, ast.Assert):
        return False
    if isinstance(node, ast.Expr):
        value = node.value
        if isinstance(value, (ast.Constant, ast.Name, ast.Attribute)):
            return False
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "check":
            return False
    return True


def _parse_exercises(ext: Extraction, label: str) -> tuple[dict[str, LoadedExercise], dict[str, ast.Module], set[str]]:
    """Parse every exercise cell: ``(results, trees, needed names)``.

    ``results`` has one entry per exercise (a syntax error is recorded in its ``error``); ``trees``
    holds the parsed cells without what :func:`_runs` leaves out; ``needed`` is every name they use.
    """
    results: dict[str, LoadedExercise] = {}
    trees: dict[str, ast.Module] = {}
    needed: set[str] = set()
    for eid, cell in ext.cells.items():
        le = LoadedExercise(eid)
        results[eid] = le
        try:
            tree = ast.parse(strip_magics(cell.source), filename=f"<{label} cell {cell.index}>")
        except SyntaxError as e:
            le.error = (
                f"the exercise cell (cell {cell.index}) has a syntax error at line {e.lineno}: {e.msg}; it cannot run"
            )
            continue
        tree.body = [n for n in tree.body if _runs(n)]
        trees[eid] = tree
        needed |= _used_names(tree)
    return results, trees, needed


def _run_setup(ext: Extraction, needed: set[str], ns: dict[str, Any], runner: Runner, label: str) -> list[str]:
    """Run the imports / defs / literal constants of other cells that the exercises use, in ``ns``.

    Returns one note per statement that failed (the exercises may still work without it).
    """
    setup_notes: list[str] = []
    for idx, node, _src in _setup_statements(ext.other_cells, needed):
        mod = ast.Module(body=[node], type_ignores=[])
        filename = f"<{label} cell {idx}>"
        try:
            code = compile(mod, filename, "exec")
            runner(lambda: exec(code, ns))  # noqa: S102 - the learner's own code, in the sandbox
        except BaseException as e:  # noqa: BLE001 - SystemExit, time limit etc. from learner code
            setup_notes.append(f"setup from cell {idx} failed ({type(e).__name__}: {_short(e)})")
    return setup_notes


def _run_exercise_cell(cell: ExerciseCell, tree: ast.Module, ns: dict[str, Any], runner: Runner, label: str) -> str:
    """Execute one parsed exercise cell in ``ns``; the error message, or "" when it ran."""
    filename = f"<{label} cell {cell.index}>"
    _register_source(filename, strip_magics(cell.source))
    try:
        code = compile(tree, filename, "exec")
        runner(lambda: exec(code, ns))  # noqa: S102
    except BaseException as e:  # noqa: BLE001
        if _is_time_limit(e):
            return f"the exercise cell (cell {cell.index}) did not finish in time (an endless loop at top level?)"
        if isinstance(e, SystemExit):
            return f"the exercise cell (cell {cell.index}) called sys.exit(); remove that call"
        line = _line_of(e, filename)
        return f"the exercise cell (cell {cell.index}) raised {type(e).__name__}: {_short(e)}" + (
            f" (line {line})" if line else ""
        )
    return ""


def load_exercises(
    ext: Extraction,
    names: dict[str, str],
    namespace: dict[str, Any] | None = None,
    run: Runner | None = None,
    label: str = "notebook",
) -> dict[str, LoadedExercise]:
    """Execute the setup and the exercise cells of ``ext``; return each exercise's object or error.

    Args:
        ext: from :func:`find_exercises`.
        names: exercise id -> learner-facing name.
        namespace: globals to execute in (default: a fresh one named ``__main__``).
        run: optional wrapper ``run(fn)`` that calls ``fn()`` (e.g. under a time limit); it must
            let exceptions through.
        label: shown in filenames of tracebacks (``<notebook cell 7>``).
    """
    ns: dict[str, Any] = namespace if namespace is not None else {"__name__": "__main__", "__builtins__": __builtins__}
    runner: Runner = run or (lambda fn: fn())
    results, trees, needed = _parse_exercises(ext, label)
    # 1. setup: imports / defs / literal constants from other cells that the exercises use
    setup_notes = _run_setup(ext, needed, ns, runner, label)
    # 2. the exercise cells, in notebook order
    for eid, cell in ext.cells.items():
        le = results[eid]
        le.notes += setup_notes
        if eid not in trees:
            continue
        le.error = _run_exercise_cell(cell, trees[eid], ns, runner, label)
        name = names.get(eid)
        if name is None:
            le.error = le.error or f"{eid} is not an exercise of this course"
            continue
        obj = ns.get(name)
        if obj is None:
            defined = [n for n in _defined_names(trees[eid]) if not n.startswith("_")]
            if not le.error:
                le.error = f"the cell marked '# EXERCISE {eid}' (cell {cell.index}) does not define {name}" + (
                    f"; it defines {', '.join(defined)}. Keep the name the lab gives" if defined else ""
                )
            continue
        le.obj = obj
        if cell.found_by == "name":
            le.notes.append(f"cell {cell.index} has no '# EXERCISE {eid}' line; found by its name {name}")
    return results


def _is_time_limit(e: BaseException) -> bool:
    return type(e).__name__ == "TimeLimitExceeded"


#: An absolute path in a message (``/home/x/.venv/lib/.../mod.so``): shown as its last part only.
_ABS_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:'\"]+/)+([^\s/:'\"]+)")


def _short(e: BaseException, n: int = 200) -> str:
    """A one-line message for ``e``: no absolute path of the machine it ran on (``…/last_part``); an import
    that failed names its module and says why it may fail only while grading."""
    try:
        s = _ABS_PATH.sub(lambda m: "…/" + m.group(1), str(e))
    except Exception:  # noqa: BLE001
        s = "?"
    if isinstance(e, ImportError) and not isinstance(e, ModuleNotFoundError):
        name = str(e.name or "").split(".")[0] or "?"
        s = (
            f"the module {name!r} could not be loaded where your notebook is graded ({s}); "
            f"if the exercise does not use it, remove the import"
        )
    return s if len(s) <= n else s[: n - 3] + "..."


def imported_modules(ext: Extraction) -> list[str]:
    """The top-level modules the cells of ``ext`` import at their top level (``import a.b`` / ``from a import
    b``: ``a``), sorted; relative imports and cells that do not parse are skipped."""
    found: set[str] = set()
    for src in [c.source for c in ext.cells.values()] + [src for _i, src in ext.other_cells]:
        try:
            tree = ast.parse(strip_magics(src))
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return sorted(found)


def _line_of(e: BaseException, filename: str) -> int | None:
    tb = e.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def exercise_names(ids: Iterable[str] | None = None) -> dict[str, str]:
    """Exercise id -> learner-facing name, for all (or the given) registered exercises."""
    exs = registry.all_exercises() if ids is None else [registry.get(i) for i in ids]
    return {ex.id: ex.name for ex in exs}
