"""Who handed in what: the learners of a ``pagedlab grade`` run, found in the paths given (notebooks, folders,
nbgrader's ``submitted/`` tree), their report names made unique, and their student ids (``--roster``)."""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagedlab.errors import PagedLabError

__all__ = ["NBGRADER_SUBMITTED", "GradeError", "Learner", "apply_roster", "discover", "name_clashes", "read_roster"]

SKIP_DIRS = {".ipynb_checkpoints", "__pycache__", ".git", "__MACOSX"}


class GradeError(PagedLabError, ValueError):
    """The grading run cannot start (no submissions, a bad option)."""


@dataclass
class Learner:
    """One learner's submission: their notebooks and what was odd about the files."""

    #: The name the reports use: the file name without ``.ipynb``, or the folder's name, exactly (any script,
    #: spaces kept), made unique with ``-2``, ``-3`` ... when two submissions have the same one.
    name: str
    #: The file or folder submitted (grades.csv column ``file``).
    source: str
    notebooks: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: The student's id, when known (Gradescope's ``submission_metadata.json``, nbgrader's
    #: ``submitted/<student_id>/<assignment>/`` folders, ``--roster``); "" otherwise.
    student_id: str = ""


# --- discovery ------------------------------------------------------------------------------------------
def _base_name(name: str) -> str:
    """A file or folder name as a learner's name: exactly as it is (any script, spaces), except for
    characters no file name may hold (path separators, control characters), which become ``_``."""
    out = re.sub(r"[\x00-\x1f\x7f/\\]", "_", name)
    return out if out.strip(". ") else "learner"


def _safe_name(name: str, taken: set[str]) -> str:
    """``name`` (see :func:`_base_name`), or ``name-2``, ``name-3`` ... when taken: every learner's name is unique,
    so no two submissions share a row, a feedback page or a results folder."""
    base = _base_name(name)
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    taken.add(candidate)
    return candidate


def _notebooks_under(folder: Path, problems: list[str]) -> list[Path]:
    out: list[Path] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            p = Path(root) / f
            rel = p.relative_to(folder)
            if f.startswith("."):
                continue
            if p.is_symlink():
                problems.append(f"{rel}: a symbolic link, skipped")
            elif f.endswith(".ipynb"):
                out.append(p)
            else:
                problems.append(f"{rel}: not a notebook (.ipynb), skipped")
    return out


#: nbgrader's course folder of collected submissions: ``submitted/<student_id>/<assignment>/<notebook>.ipynb``.
NBGRADER_SUBMITTED = "submitted"
#: Files nbgrader's collect writes next to a submission's notebooks (not the learner's).
NBGRADER_FILES = frozenset({"timestamp.txt"})


def _folder_learner(folder: Path, name: str, label: str, ignore: frozenset[str] = frozenset()) -> Learner:
    """The learner ``name`` whose work is every notebook under ``folder`` (``label``: the folder in messages;
    ``ignore``: file names not reported as skipped)."""
    problems: list[str] = []
    lr = Learner(name, str(folder), _notebooks_under(folder, problems))
    lr.problems = [m for m in problems if m.split(":", 1)[0] not in ignore]
    if not lr.notebooks:
        lr.problems.append(f"{label}/: no notebook (.ipynb) inside")
    return lr


def _nbgrader_learners(folder: Path, taken: set[str]) -> list[Learner]:
    """One learner per ``<student_id>/<assignment>/`` of nbgrader's ``submitted/`` folder (ids kept)."""
    out = []
    for student in sorted(e for e in folder.iterdir() if e.is_dir() and not e.name.startswith(".")):
        for assignment in sorted(e for e in student.iterdir() if e.is_dir() and not e.name.startswith(".")):
            name = _safe_name(f"{student.name}_{assignment.name}", taken)
            lr = _folder_learner(assignment, name, f"{student.name}/{assignment.name}", NBGRADER_FILES)
            lr.student_id = student.name
            out.append(lr)
    return out


def discover(paths: Sequence[Any]) -> list[Learner]:  # noqa: C901 - one branch per kind of path given (missing, file, nbgrader folder, folder entry)
    """Learners from the command-line paths (see the module docstring); nbgrader's ``submitted/`` folder gives one
    learner per student and assignment, with the student's id."""
    learners: list[Learner] = []
    taken: set[str] = set()

    def skip(p: Path, name: str, why: str) -> None:
        learners.append(Learner(_safe_name(name, taken), str(p), problems=[why]))

    def add_file(p: Path) -> None:
        if p.suffix == ".ipynb":
            learners.append(Learner(_safe_name(p.stem, taken), str(p), [p]))
        else:
            skip(p, p.name, f"{p.name}: not a notebook (.ipynb); nothing to grade")

    for raw in paths:
        p = Path(raw)
        if not p.exists():
            skip(p, p.name or str(p), f"{p}: no such file or folder")
        elif p.is_file():
            add_file(p)
        elif p.is_dir() and p.resolve().name == NBGRADER_SUBMITTED:
            learners += _nbgrader_learners(p, taken)
        elif p.is_dir():
            for entry in sorted(p.iterdir()):
                if entry.name.startswith(".") or entry.name in SKIP_DIRS:
                    continue
                if entry.is_symlink():
                    skip(entry, entry.name, f"{entry.name}: a symbolic link, skipped")
                elif entry.is_dir():
                    learners.append(_folder_learner(entry, _safe_name(entry.name, taken), entry.name))
                else:
                    add_file(entry)
    return learners


def read_roster(path: Any) -> dict[str, str]:
    """A roster CSV (``--roster``): a header row with a ``file`` column (the submitted file or folder: its name, or
    its path as given to ``pagedlab grade``) and a ``student_id`` column; returns file -> student id.

    Raises:
        GradeError: no such file, no such columns, an empty id, or a file listed twice.
    """

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
            columns = rows[0].keys() if rows else []
    except OSError as e:
        raise GradeError(f"--roster {path}: cannot be read ({e.strerror or e})") from e
    if not {"file", "student_id"} <= set(columns):
        raise GradeError(f"--roster {path}: needs a header row with the columns 'file' and 'student_id'")
    out: dict[str, str] = {}
    for i, row in enumerate(rows, start=2):
        file, sid = (row.get("file") or "").strip(), (row.get("student_id") or "").strip()
        if not file or not sid:
            raise GradeError(f"--roster {path}, line {i}: an empty 'file' or 'student_id'")
        if file in out:
            raise GradeError(f"--roster {path}, line {i}: {file!r} is listed twice")
        out[file] = sid
    return out


def apply_roster(learners: Sequence[Learner], roster: dict[str, str]) -> list[str]:
    """Give each learner the student id of its roster row (matched by the submitted path as given, else by its
    file or folder name, exactly); return a warning per roster row that matched no submission."""
    used: set[str] = set()
    for lr in learners:
        for key in (lr.source, Path(lr.source).name):
            if key in roster:
                lr.student_id = roster[key]
                used.add(key)
                break
    return [f"warning: --roster: no submission {f!r} (student {sid})" for f, sid in roster.items() if f not in used]


def name_clashes(learners: Sequence[Learner]) -> list[str]:
    """One warning per discovered learner renamed ``name-N`` because another submission has the same name, e.g. two
    learner folders given on the command line that both hold ``02_block_pool.ipynb`` (each notebook of a
    folder given there is a learner of its own: give the folder above them to grade each as one learner)."""
    out = []
    for lr in learners:
        src = Path(lr.source)
        base = _base_name(src.stem if src.suffix == ".ipynb" else src.name)
        if src.parent.parent.name == NBGRADER_SUBMITTED and lr.student_id:
            base = _base_name(f"{lr.student_id}_{src.name}")
        if lr.name != base:
            out.append(
                f"warning: two submissions are named {base!r}: {lr.source} is reported as {lr.name!r}. "
                "A folder given on the command line holds one notebook or subfolder per learner; to grade "
                "a learner's folder of notebooks as one learner, give the folder that contains it"
            )
    return out
