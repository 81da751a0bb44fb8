"""docs/architecture.md draws the code's layout, and the layout keeps its budgets.

* The picture of the packages and who imports whom is generated from the imports (:func:`layout_picture`,
  read with ``ast`` by ``tests/test_layers.py``'s import reader: function-level and string imports counted)
  and must match the code; ``PAGEDLAB_REGEN_DOCS=1 pytest tests/test_layout.py`` rewrites it.
* Each folder's line budget is written in the document's budget table; every folder has one, and holds it.
* No module of the grader, the course or the containment layer is over :data:`MAX_MODULE_LINES`.
"""

from __future__ import annotations

import ast
import os
import re
import textwrap
from pathlib import Path

from tests.test_layers import LAYERS, MODULES, ROOT, import_graph, layer_of, package_graph

DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- layout: generated from the imports by tests/test_layout.py; do not edit by hand -->"
END = "<!-- end of the layout -->"
#: The longest module allowed in the folders below (a reader holds a file in one sitting).
MAX_MODULE_LINES = 700
SPLIT_FOLDERS = ("grading", "course", "containment")


def _name(part: str) -> str:
    """``core/``, ``cli.py``, or ``pagedlab/__init__`` for the package root."""
    if part == "":
        return "pagedlab/__init__"
    path = ROOT / "pagedlab" / part
    return f"{part}/" if path.is_dir() or part == "kernels" else f"{part}.py"


def layout_picture(graph: dict[str, set[str]] | None = None) -> str:
    """Every part of ``pagedlab`` by layer, highest first, each with the parts it imports (a fenced block)."""
    if graph is None:
        graph = import_graph({m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()})
    parts = package_graph(graph)
    lines = ["```"]
    for layer in sorted(set(LAYERS.values()), reverse=True):
        for part in sorted(p for p, n in LAYERS.items() if n == layer):
            uses = [_name(t) for t in sorted(parts.get(part, ()), key=lambda t: (-LAYERS[t], t))]
            lines += textwrap.wrap(
                f"layer {layer:>2}  {_name(part):<18} -> {', '.join(uses) or '(nothing of pagedlab)'}",
                width=112,
                subsequent_indent=" " * 32,
                break_on_hyphens=False,
            )
    return "\n".join(lines + ["```"])


def folder_lines() -> dict[str, int]:
    """Lines of every folder of ``pagedlab`` (``kernels`` included), and ``pagedlab/*.py`` as ``"*.py"``."""
    out: dict[str, int] = {}
    for module, path in MODULES.items():
        top = layer_of(module)[0]
        key = f"{top}/" if top and ((ROOT / "pagedlab" / top).is_dir() or top == "kernels") else "*.py"
        out[key] = out.get(key, 0) + len(path.read_text(encoding="utf-8").splitlines())
    return out


def budgets(text: str) -> dict[str, int]:
    """The budget table of the document: ``| `core/` | 2,600 | ...`` rows -> ``{"core/": 2600}``."""
    rows = re.findall(r"^\| `([a-z0-9_*./]+)` \| ([\d,]+) \|", text, flags=re.M)
    return {folder: int(n.replace(",", "")) for folder, n in rows}


def test_the_picture_in_the_architecture_doc_is_the_code_s() -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    want = "\n" + layout_picture() + "\n"
    if os.environ.get("PAGEDLAB_REGEN_DOCS"):
        DOC.write_text(text[:start] + want + text[end:], encoding="utf-8")
        text = DOC.read_text(encoding="utf-8")
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    assert text[start:end] == want, "regenerate: PAGEDLAB_REGEN_DOCS=1 pytest tests/test_layout.py"


def test_the_picture_shows_an_import_added_between_two_parts() -> None:
    graph = {"pagedlab.core.block_pool": {"pagedlab.request"}, "pagedlab.request": set()}
    before = layout_picture(graph)
    assert "layer  1  core/              -> request.py" in before.splitlines()
    graph["pagedlab.request"] = {"pagedlab.errors"}
    after = layout_picture(graph)
    assert after != before and "layer  0  request.py         -> errors.py" in after.splitlines()


def test_every_folder_has_a_budget_and_holds_it() -> None:
    written, have = budgets(DOC.read_text(encoding="utf-8")), folder_lines()
    assert set(written) == set(have), f"budget table rows {sorted(written)} vs folders {sorted(have)}"
    assert written["grading/"] <= 8_200 and written["containment/"] <= 1_400  # issue 34's two fixed budgets
    over = {f: f"{have[f]} lines > budget {written[f]}" for f in have if have[f] > written[f]}
    assert over == {}, over


def test_the_budget_reader_reads_the_table_rows() -> None:
    table = "| folder | budget |\n|---|---|\n| `core/` | 2,600 | blocks |\n| `*.py` | 900 | root |\nnot | `x/` | 1 |"
    assert budgets(table) == {"core/": 2600, "*.py": 900}


def test_no_module_of_the_grader_the_course_or_containment_is_over_the_limit() -> None:
    long = {
        m: n
        for m, p in MODULES.items()
        if layer_of(m)[0] in SPLIT_FOLDERS and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, long


def test_the_folders_are_where_the_layers_say() -> None:
    assert all(Path(ROOT / "pagedlab" / f).is_dir() for f in SPLIT_FOLDERS)
