"""``pagedlab labs build`` / ``pagedlab labs check``: generate ``labs/`` from ``solutions/``.

``solutions/`` is the single source. A lab notebook is its solution with:

* the code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` replaced by
  ``raise NotImplementedError("exercise <id>: ...")`` at the marker's indentation (the signature
  and docstring above the marker stay; a markdown answer becomes "*Your answer here.*");
* the lines between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` removed (a cell left
  empty is dropped), and cells tagged ``hidden-tests`` or ``solution-only`` dropped;
* outputs, execution counts, widget state and per-cell run metadata stripped;
* links to a page of ``LAB_PAGES`` (``../docs/bugs.md#b8``) pointed at its copy beside the labs
  (``bugs.md#b8``): Jupyter serves only the labs folder and the wheel ships no ``docs/``, so the page
  is written into ``labs/`` by ``build`` and travels with the notebooks (wheel, ``labs copy``).

The exercise id is the text after ``### BEGIN SOLUTION`` if any, else the cell's
``metadata.pagedlab.exercise`` (or nbgrader ``grade_id``), else ``<notebook>/<enclosing def>``.

Learners' work is never overwritten silently: each generated lab stores
``metadata.pagedlab.generated_sha``, a fingerprint of its cells (types, sources, outputs). A lab
whose fingerprint no longer matches was changed after it was generated - edited or run and
saved - and ``build`` leaves it alone and reports it unless ``--force`` is given. ``check``
exits 1 listing every lab that is missing, stale or changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pagedlab import data
from pagedlab.errors import PagedLabError
from pagedlab.grading.extract import cell_source

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
DROP_TAGS = {"hidden-tests", "hidden_tests", "solution-only", "solution_only"}
#: Cell metadata kept in labs (nbval / JupyterLab / nbgrader behaviour); the rest is run noise.
KEEP_CELL_METADATA = ("tags", "editable", "deletable", "nbgrader", "pagedlab")
MARKDOWN_ANSWER = "*Your answer here.*"
#: Pages the notebooks link to, shipped beside the labs: name in the labs folder -> its source,
#: relative to the repository root (the folder above ``solutions/``).
LAB_PAGES = {"bugs.md": "docs/bugs.md"}


class LabsBuildError(PagedLabError, ValueError):
    """A solution notebook cannot be turned into a lab (unbalanced markers, invalid JSON)."""


# --------------------------------------------------------------------------------- generation
def _exercise_id(marker_rest: str, cell: dict[str, Any], lines_before: list[str], stem: str, index: int) -> str:
    if marker_rest.strip():
        return marker_rest.strip()
    meta = cell.get("metadata", {})
    for key in (("pagedlab", "exercise"), ("nbgrader", "grade_id")):
        v = meta.get(key[0], {}).get(key[1]) if isinstance(meta.get(key[0]), dict) else None
        if v:
            return str(v)
    for line in lines_before:  # the cell's "# EXERCISE <id>" line names it
        m = re.match(r"\s*#\s*EXERCISE\s+(\S+)", line)
        if m:
            return m.group(1)
    for line in reversed(lines_before):
        m = re.match(r"\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", line)
        if m:
            return f"{stem}/{m.group(1)}"
    return f"{stem}/cell{index}"


def _strip_region(lines: list[str], begin: str, end: str, where: str) -> tuple:
    """Yield (kept lines, list of (indent, marker rest, lines before)) for each begin..end region."""
    out: list[str] = []
    regions = []
    inside = False
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith(begin):
            if inside:
                raise LabsBuildError(f"{where}, line {n}: '{begin}' inside another '{begin}'")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            regions.append((indent, s[len(begin) :], list(out), len(out)))
            continue
        if s.startswith(end):
            if not inside:
                raise LabsBuildError(f"{where}, line {n}: '{end}' without '{begin}'")
            inside = False
            continue
        if not inside:
            out.append(line)
    if inside:
        raise LabsBuildError(f"{where}: '{begin}' is never closed by '{end}'")
    return out, regions


def _stub_code(text: str, cell: dict[str, Any], stem: str, index: int) -> str:
    lines = text.splitlines(keepends=True)
    where = f"{stem}.ipynb cell {index}"
    kept, regions = _strip_region(lines, BEGIN_SOLUTION, END_SOLUTION, where)
    # insert the stubs back where each region was, last first so offsets stay valid
    for indent, rest, before, at in reversed(regions):
        ex = _exercise_id(rest, cell, before, stem, index)
        stub = f'{indent}raise NotImplementedError("exercise {ex}: replace this line with your code")\n'
        kept.insert(at, stub)
    out = "".join(kept)
    return out.rstrip("\n") if not text.endswith("\n") else out


def _stub_markdown(text: str, stem: str, index: int) -> str:
    lines = text.splitlines(keepends=True)
    kept, regions = _strip_region(lines, BEGIN_SOLUTION, END_SOLUTION, f"{stem}.ipynb cell {index}")
    for _indent, _rest, _before, at in reversed(regions):
        kept.insert(at, MARKDOWN_ANSWER + "\n")
    return "".join(kept).rstrip("\n")


def _drop_hidden(text: str, stem: str, index: int) -> str:
    lines = text.splitlines(keepends=True)
    kept, _ = _strip_region(lines, BEGIN_HIDDEN, END_HIDDEN, f"{stem}.ipynb cell {index}")
    return "".join(kept).rstrip("\n") if kept else ""


def fingerprint(nb: dict[str, Any]) -> str:
    """SHA-256 of what a learner can change: each cell's type, source and outputs.

    Notebook and cell metadata (kernel versions, widget state, JupyterLab's bookkeeping) and
    execution counts are left out, so opening and saving an untouched lab keeps the fingerprint.
    """
    cells = [
        [c.get("cell_type"), cell_source(c), c.get("outputs", []) if c.get("cell_type") == "code" else []]
        for c in nb.get("cells", [])
    ]
    blob = json.dumps(cells, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _link_pages(markdown: str) -> str:
    """``markdown`` with its links to a ``LAB_PAGES`` source pointed at the copy beside the labs."""
    for name, source in LAB_PAGES.items():
        markdown = markdown.replace(f"](../{source}", f"]({name}")
    return markdown


def _lab_cell(cell: dict[str, Any], index: int, stem: str, nbformat_minor: int) -> dict[str, Any] | None:
    """The lab's version of solution cell number ``index``, or None when the lab drops it.

    A cell is dropped when a tag in ``DROP_TAGS`` marks it or nothing is left once its hidden parts
    are removed; solution parts become stubs. Raises :class:`LabsBuildError` on bad markers.
    """
    meta = dict(cell.get("metadata", {}))
    tags = set(meta.get("tags", []))
    if tags & DROP_TAGS:
        return None
    text = cell_source(cell)
    ctype = cell.get("cell_type", "code")
    if BEGIN_HIDDEN in text or END_HIDDEN in text:
        text = _drop_hidden(text, stem, index)
        if not text.strip():
            return None
    if BEGIN_SOLUTION in text or END_SOLUTION in text:
        text = _stub_code(text, cell, stem, index) if ctype == "code" else _stub_markdown(text, stem, index)
    if ctype == "markdown":
        text = _link_pages(text)
    new: dict[str, Any] = {
        "cell_type": ctype,
        "metadata": {k: meta[k] for k in KEEP_CELL_METADATA if k in meta},
        "source": text.splitlines(keepends=True),
    }
    if "id" in cell:
        new["id"] = cell["id"]
    elif nbformat_minor >= 5:
        new["id"] = hashlib.sha1(f"{stem}:{index}".encode()).hexdigest()[:8]
    if ctype == "code":
        new["execution_count"] = None
        new["outputs"] = []
    if "attachments" in cell and ctype in ("markdown", "raw"):
        new["attachments"] = cell["attachments"]
    return new


def generate_lab(solution: dict[str, Any], stem: str, source_path: str = "") -> dict[str, Any]:
    """The lab notebook generated from a solution notebook (a new dict; the input is untouched).

    Args:
        solution: the solution notebook as parsed JSON (nbformat 4).
        stem: notebook name without ``.ipynb`` (for exercise ids and messages).
        source_path: recorded as ``metadata.pagedlab.generated_from``.

    Raises:
        LabsBuildError: unbalanced or nested markers.
    """
    minor = solution.get("nbformat_minor", 0)
    cells = [
        new
        for index, cell in enumerate(solution.get("cells", []))
        if (new := _lab_cell(cell, index, stem, minor)) is not None
    ]
    smeta = solution.get("metadata", {})
    meta: dict[str, Any] = {}
    if "kernelspec" in smeta:
        meta["kernelspec"] = smeta["kernelspec"]
    if "language_info" in smeta:
        meta["language_info"] = {"name": smeta["language_info"].get("name", "python")}
    lab = {
        "cells": cells,
        "metadata": meta,
        "nbformat": solution.get("nbformat", 4),
        "nbformat_minor": solution.get("nbformat_minor", 5),
    }
    meta["pagedlab"] = {
        "generated_from": source_path or f"solutions/{stem}.ipynb",
        "generated_sha": fingerprint(lab),
        "note": "generated by `pagedlab labs build`; edit solutions/ instead",
    }
    return lab


def dumps(nb: dict[str, Any]) -> str:
    """Serialise as Jupyter does (``nbformat.writes``: indent 1, sorted keys, UTF-8), plus a newline."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------- build / check
@dataclass
class LabStatus:
    """What ``build``/``check`` found (and did) for one notebook.

    ``state`` is one of: ``up-to-date``, ``missing`` (no lab yet), ``stale`` (the lab is an
    unchanged older generation), ``changed`` (the lab was edited or run after it was generated:
    protected), ``orphan`` (a generated lab whose solution is gone), ``error``.
    """

    name: str
    state: str
    action: str = ""  # "written", "kept", "overwritten (--force)", ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "up-to-date" or self.action in ("written", "overwritten (--force)")


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise LabsBuildError(f"{path}: not a readable notebook ({e})") from e


def _solutions(solutions_dir: Path, names: Sequence[str] | None) -> list[Path]:
    paths = sorted(p for p in solutions_dir.glob("*.ipynb") if not p.name.startswith((".", "_")))
    if names:
        wanted = {n if n.endswith(".ipynb") else n + ".ipynb" for n in (Path(x).name for x in names)}
        missing = wanted - {p.name for p in paths}
        if missing:
            raise LabsBuildError(f"no such solution notebook(s) in {solutions_dir}: {', '.join(sorted(missing))}")
        paths = [p for p in paths if p.name in wanted]
    return paths


_BUILD_HINT = "pass --labs DIR (a writable folder)"
_COPY_HINT = "choose a folder you can write"


def _classify(lab_path: Path, expected_text: str, hint: str = _BUILD_HINT) -> tuple:
    """``(state, detail)`` of the notebook at ``lab_path`` against ``expected_text``.

    Raises:
        LabsBuildError: ``lab_path`` cannot be read (a folder of that name, no permission), one line.
    """
    if not lab_path.exists():
        return "missing", ""
    try:
        raw = lab_path.read_bytes()
    except OSError as e:
        raise LabsBuildError(f"cannot write {lab_path}: {e.strerror or e}; {hint}") from e
    try:
        current_text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "changed", "the file is not UTF-8 text"
    if current_text == expected_text:
        return "up-to-date", ""
    try:
        current = json.loads(current_text)
    except ValueError:
        return "changed", "the file is not valid JSON"
    recorded = current.get("metadata", {}).get("pagedlab", {}).get("generated_sha")
    if recorded is None:
        return "changed", "it was not generated by `pagedlab labs build` (no metadata.pagedlab.generated_sha)"
    if fingerprint(current) != recorded:
        has_out = any(c.get("outputs") for c in current.get("cells", []))
        return "changed", "edited or run and saved since it was generated" + (" (it has outputs)" if has_out else "")
    return "stale", "an older generation; the solution changed since"


#: ``generate(solution, stem, source_path) -> notebook``: :func:`generate_lab`, or a
#: :func:`pagedlab.course.formats.generator` (``--format nbgrader|otter``).
Generator = Callable[[dict[str, Any], str, str], dict[str, Any]]


def scan(
    solutions_dir: Path, labs_dir: Path, names: Sequence[str] | None = None, generate: Generator | None = None
) -> list[tuple[LabStatus, str | None]]:
    """``(LabStatus, expected_text or None)`` for every solution notebook (and orphaned lab)."""
    out: list[tuple[LabStatus, str | None]] = []
    for name, text in _pages(solutions_dir).items():
        page = labs_dir / name
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            state = "stale" if page.is_file() else "missing"
            out.append((LabStatus(name, state, detail=f"a copy of {LAB_PAGES[name]} the labs link to"), None))
    sol_paths = _solutions(solutions_dir, names)
    for sp in sol_paths:
        try:
            lab = (generate or generate_lab)(_load(sp), sp.stem, f"{solutions_dir.name}/{sp.name}")
        except LabsBuildError as e:
            out.append((LabStatus(sp.name, "error", detail=str(e)), None))
            continue
        expected = dumps(lab)
        state, detail = _classify(labs_dir / sp.name, expected)
        out.append((LabStatus(sp.name, state, detail=detail), expected))
    if not names and labs_dir.is_dir():
        have = {p.name for p in sol_paths}
        for lp in sorted(labs_dir.glob("*.ipynb")):
            if lp.name in have:
                continue
            try:
                generated = "generated_sha" in _load(lp).get("metadata", {}).get("pagedlab", {})
            except LabsBuildError:
                generated = False
            if generated:  # a learner's own scratch notebooks are none of our business
                out.append(
                    (
                        LabStatus(
                            lp.name,
                            "orphan",
                            detail=f"generated from a solution that no longer "
                            f"exists in {solutions_dir}; delete it by hand",
                        ),
                        None,
                    )
                )
    return out


def _pages(solutions_dir: Path) -> dict[str, str]:
    """``LAB_PAGES`` found beside ``solutions_dir``: name in the labs folder -> its text."""
    root = solutions_dir.parent
    return {n: (root / s).read_text(encoding="utf-8") for n, s in LAB_PAGES.items() if (root / s).is_file()}


def _write_lab(path: Path, text: str, hint: str = _BUILD_HINT) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise LabsBuildError(f"cannot write {path}: {e.strerror or e}; {hint}") from e


def _update(path: Path, st: LabStatus, expected: str, force: bool, hint: str = _BUILD_HINT) -> LabStatus:
    """Write ``expected`` to ``path`` when ``st`` is missing or stale, or changed and ``force``; a changed one
    is otherwise kept (its ``action`` says which)."""
    if st.state in ("missing", "stale") or (st.state == "changed" and force):
        _write_lab(path, expected, hint)
        st.action = "overwritten (--force)" if st.state == "changed" else "written"
    elif st.state == "changed":
        st.action = "kept"
    return st


def build(
    solutions_dir: Path,
    labs_dir: Path,
    force: bool = False,
    names: Sequence[str] | None = None,
    generate: Generator | None = None,
) -> list[LabStatus]:
    """Write every missing or stale lab; keep (and report) changed ones unless ``force``.

    ``generate``: how a solution becomes the written notebook (default :func:`generate_lab`).

    Raises:
        LabsBuildError: ``labs_dir`` is a file, or it or a lab in it cannot be written (read-only).
    """
    if labs_dir.exists() and not labs_dir.is_dir():
        raise LabsBuildError(f"{labs_dir} is a file, not a folder: pass --labs DIR (a folder)")
    try:
        labs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabsBuildError(f"cannot create the labs folder {labs_dir}: {e.strerror or e}") from e
    results = []
    for name, text in _pages(solutions_dir).items():
        if not (labs_dir / name).is_file() or (labs_dir / name).read_text(encoding="utf-8") != text:
            _write_lab(labs_dir / name, text)
    for st, expected in scan(solutions_dir, labs_dir, names, generate):
        results.append(_update(labs_dir / st.name, st, expected, force) if expected is not None else st)
    return results


def _copy_pages(src: Path, dest: Path) -> None:
    """The pages the notebooks link to (``LAB_PAGES``), from ``src`` into ``dest``: always the shipped text."""
    for name in LAB_PAGES:
        if (src / name).is_file():
            _write_lab(dest / name, (src / name).read_text(encoding="utf-8"), _COPY_HINT)


def copy_labs(dest: Path, force: bool = False, source: Path | None = None) -> list[LabStatus]:
    """Copy the kit's learner notebooks (``labs/*.ipynb``, shipped in the wheel) into folder ``dest``.

    The same protection as :func:`build`: a notebook already in ``dest`` that a learner edited or ran
    and saved (its fingerprint no longer matches) is kept and reported unless ``force``; missing and
    unchanged older copies are written; identical ones are left as they are.

    Args:
        dest: target folder, created if missing.
        force: also overwrite notebooks that were changed since they were copied.
        source: folder of lab notebooks (default :func:`pagedlab.data.labs_directory`).

    Raises:
        DataFileNotFoundError: the install ships no labs. LabsBuildError: ``dest`` exists and is not a
            folder, or cannot be written.
    """

    src = source or data.labs_directory()
    if dest.exists() and not dest.is_dir():
        raise LabsBuildError(f"{dest} exists and is not a folder")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabsBuildError(f"cannot write {dest}: {e.strerror or e}; {_COPY_HINT}") from e
    results = []
    for lab in sorted(src.glob("*.ipynb")):
        expected = lab.read_text(encoding="utf-8")
        state, detail = _classify(dest / lab.name, expected, _COPY_HINT)
        results.append(_update(dest / lab.name, LabStatus(lab.name, state, detail=detail), expected, force, _COPY_HINT))
    if not results:
        raise LabsBuildError(f"no lab notebooks in {src}; reinstall pagedlab")
    _copy_pages(src, dest)
    return results


def check(solutions_dir: Path, labs_dir: Path, names: Sequence[str] | None = None) -> list[LabStatus]:
    """Report, change nothing."""
    return [st for st, _ in scan(solutions_dir, labs_dir, names)]


# --------------------------------------------------------------------------------- CLI
