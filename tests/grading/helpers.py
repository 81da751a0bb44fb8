"""Helpers for the grading tests: solution / stub / wrong variants of the exercise cells, notebooks."""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pagedlab.course.labs_build import generate_lab
from pagedlab.grading import registry


def stub_source(exercise_id: str) -> str:
    """The exercise cell as `pagedlab labs build` hands it to learners."""
    src = registry.snippet_source(exercise_id)
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [{"cell_type": "code", "metadata": {}, "source": src, "outputs": [], "execution_count": None}],
    }
    lab = generate_lab(nb, f"{exercise_id.split('.')[0]}_lab")
    return "".join(lab["cells"][0]["source"])


def variant(exercise_id: str, *replacements: Sequence[str]) -> str:
    """The solution cell with (old, new) replacements; every `old` must occur (no silent no-op)."""
    src = registry.snippet_source(exercise_id)
    for old, new in replacements:
        assert old in src, f"{exercise_id}: {old!r} not in the solution cell"
        src = src.replace(old, new)
    return src


def make_notebook(cells: list[Any]) -> dict[str, Any]:
    """A notebook from cells: a str is a code cell, ("md", text) a markdown cell (nbformat v4)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    for c in cells:
        if isinstance(c, tuple) and c[0] == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(c[1]))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(c))
    return nb


def write_notebook(path: Path, cells: list[Any]) -> Path:
    import nbformat

    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(make_notebook(cells), str(path))
    return path


def load_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


# --- wrong versions (tests/grading/wrong_versions/<exercise id>/<name>.py) ---------------------------
WRONG_VERSIONS_DIR = Path(__file__).resolve().parent / "wrong_versions"

#: The kinds of mistake issue 23 found the exercises' tests missing, each to be stood for by at least three
#: wrong versions (``pattern:`` lines) that check() fails with a hint naming the mistake.
PATTERNS: tuple[str, ...] = (
    "changes an input it only reads",
    "rebinds what it must change in place",
    "returns another container or number type",
    "more requests than max_num_seqs",
    "two victims in one step",
    "a priority victim before the current request",
    "running requests several tokens behind",
    "running requests walked out of order",
    "a prompt shorter than its prefix hit",
    "fp16 / bf16 caches",
    "int64 block ids",
    "garbage past the sequence",
    "what only a GPU would show (Triton)",
)


@dataclass(frozen=True)
class WrongVersion:
    """A plausible wrong implementation of an exercise, stored as a file.

    The file's docstring says the mistake (first line), then ``caught by: <test title>`` (the test
    whose failure ``check()`` must report first) and optionally ``hint: <text>`` lines (each must
    appear in that failure's message) and ``not hint: <text>`` lines (none may appear); ``pattern: <name>``
    lines name the kinds of mistake of issue 23 it stands for (:data:`PATTERNS`), an ``engine: <why>`` line
    why the engine serves it like its own part when plugged (``tests/grading/plugged.py``). The rest of
    the file is either ``REPLACE = [(old, new), ...]`` - edits of the solution cell, each ``old``
    must occur - or, without ``REPLACE``, a whole exercise cell.
    """

    exercise: str
    name: str
    mistake: str
    caught_by: str
    hints: tuple[str, ...]
    not_hints: tuple[str, ...]
    source: str
    patterns: tuple[str, ...] = ()
    engine: str = ""


def _parse_wrong_version(exercise: str, path: Path) -> WrongVersion:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, str(path))
    doc = ast.get_docstring(tree)
    if not doc:
        raise ValueError(f"{path}: no docstring naming the mistake")
    lines = doc.splitlines()
    fields: dict[str, list[str]] = {"caught by": [], "hint": [], "not hint": [], "pattern": [], "engine": []}
    for ln in lines[1:]:
        key, sep, value = ln.partition(":")
        if sep and key.strip() in fields:
            fields[key.strip()].append(value.strip())
    if len(fields["caught by"]) != 1:
        raise ValueError(f"{path}: the docstring needs exactly one 'caught by: <test title>' line")
    replace = next(
        (
            node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "REPLACE" for t in node.targets)
        ),
        None,
    )
    source = variant(exercise, *ast.literal_eval(replace)) if replace is not None else text
    return WrongVersion(
        exercise,
        path.stem,
        lines[0].strip(),
        fields["caught by"][0],
        tuple(fields["hint"]),
        tuple(fields["not hint"]),
        source,
        tuple(fields["pattern"]),
        " ".join(fields["engine"]),
    )


def wrong_versions() -> list[WrongVersion]:
    """Every stored wrong version, by exercise id then file name."""
    out = []
    for folder in sorted(p for p in WRONG_VERSIONS_DIR.iterdir() if p.is_dir() and not p.name.startswith("_")):
        for path in sorted(folder.glob("*.py")):
            out.append(_parse_wrong_version(folder.name, path))
    return out


def wrong_versions_table(versions: Sequence[WrongVersion]) -> str:
    """docs/wrong_versions.md: exercise | wrong version | the test that catches it."""
    intro = (
        "Generated by `tests/grading/test_wrong_versions.py` from `tests/grading/wrong_versions/` "
        "(regenerate: `PAGEDLAB_REGEN_DOCS=1 pytest tests/grading/test_wrong_versions.py`). "
        "Each row is a plausible learner mistake; CI asserts that `check()` fails it first at the test named."
    )
    head = [
        "# Wrong versions and the tests that catch them",
        "",
        intro,
        "",
        "| exercise | wrong version | test that catches it | the feedback says |",
        "|---|---|---|---|",
    ]
    rows = [
        f"| `{v.exercise}` | {v.mistake} (`{v.name}.py`) | {v.caught_by} | "
        + "; ".join(f"“{h}”" for h in v.hints).replace("|", "\\|")
        + " |"
        for v in versions
    ]
    pats = [
        "",
        "## The kinds of mistake of issue 23",
        "",
        "Each kind the exercises' tests once missed, with the wrong versions that stand for it (their `pattern:` "
        "line); CI asserts at least three per kind, each failing `check()` with its hint.",
        "",
        "| kind of mistake | wrong versions | exercises |",
        "|---|---|---|",
    ]
    for p in PATTERNS:
        mine = [v for v in versions if p in v.patterns]
        pats.append(
            f"| {p} | {len(mine)}: "
            + ", ".join(f"`{v.name}`" for v in mine)
            + " | "
            + ", ".join(sorted({f"`{v.exercise}`" for v in mine}))
            + " |"
        )
    return "\n".join(head + rows + pats) + "\n"


#: Where docs/wrong_versions.md's engine section (tests/grading/test_wrong_versions_plugged.py) begins.
PLUGGED_HEADING = "## Plugged into the engine"


def doc_parts(text: str) -> tuple[str, str]:
    """docs/wrong_versions.md split into the check() part and the engine part (from :data:`PLUGGED_HEADING`)."""
    i = text.find("\n\n" + PLUGGED_HEADING)
    return (text, "") if i < 0 else (text[: i + 1], text[i + 2 :])
