"""Helpers for the grading tests: solution / stub / wrong variants of the exercise cells, notebooks."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Sequence

from pagedlab.grading import registry
from pagedlab.grading.labs_build import generate_lab


def stub_source(exercise_id: str) -> str:
    """The exercise cell as `pagedlab labs build` hands it to learners."""
    src = registry.snippet_source(exercise_id)
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
          "cells": [{"cell_type": "code", "metadata": {}, "source": src, "outputs": [], "execution_count": None}]}
    lab = generate_lab(nb, f"{exercise_id.split('.')[0]}_lab")
    return "".join(lab["cells"][0]["source"])


def variant(exercise_id: str, *replacements: Sequence[str]) -> str:
    """The solution cell with (old, new) replacements; every `old` must occur (no silent no-op)."""
    src = registry.snippet_source(exercise_id)
    for old, new in replacements:
        assert old in src, f"{exercise_id}: {old!r} not in the solution cell"
        src = src.replace(old, new)
    return src


def make_notebook(cells: List[Any]) -> Dict[str, Any]:
    """A notebook from cells: a str is a code cell, ("md", text) a markdown cell (nbformat v4)."""
    import nbformat
    nb = nbformat.v4.new_notebook()
    for c in cells:
        if isinstance(c, tuple) and c[0] == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(c[1]))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(c))
    return nb


def write_notebook(path: Path, cells: List[Any]) -> Path:
    import nbformat
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(make_notebook(cells), str(path))
    return path


def load_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())
