"""docs/instructor_guide.md says what the code does: its exercise table is the registry's (every exercise), and
every message its troubleshooting table quotes is one the code emits (issue 22, item 6).

``PAGEDLAB_REGEN_DOCS=1 pytest tests/grading/test_guide.py`` rewrites the exercise table."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from pagedlab.grading import registry
from pagedlab.grading.guide import TABLE_BEGIN, TABLE_END, exercise_table

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "instructor_guide.md"


def _string_parts() -> list[str]:
    """Every literal piece of text in pagedlab's code: str constants, and the literal parts of f-strings
    (implicitly concatenated literals are one node, so a message split over lines is whole)."""
    parts: list[str] = []
    for path in (ROOT / "pagedlab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts.append(node.value)
    return parts


def test_the_exercise_table_is_the_registry() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END)
    if os.environ.get("PAGEDLAB_REGEN_DOCS"):
        GUIDE.write_text(text[:start] + exercise_table() + text[end:], encoding="utf-8")
        text = GUIDE.read_text(encoding="utf-8")
        start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END)
    assert text[start:end] == exercise_table(), "regenerate: PAGEDLAB_REGEN_DOCS=1 pytest tests/grading/test_guide.py"
    ids = re.findall(r"^\| `(\d\d\.\w+)` \|", text[start:end], flags=re.M)
    assert ids == [ex.id for ex in registry.all_exercises()] and len(ids) == 17


def test_every_quoted_message_is_emitted_by_the_code() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## 9. Troubleshooting") :]
    messages = re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)
    assert len(messages) >= 10, messages
    parts = _string_parts()
    for message in messages:
        for fragment in re.split(r"'?<[^>]+>'?", message):
            fragment = fragment.strip(" .;:")
            if len(fragment) >= 4:
                assert any(fragment in p for p in parts), f"no code emits {fragment!r} (of the guide's {message!r})"


def test_the_guide_says_how_hub_learners_get_the_labs_and_sizes_30_learners() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    hub = text[text.index("### Learners on a JupyterHub") :]
    assert "pagedlab labs copy" in hub
    sizing = text[text.index("### Sizing a JupyterHub") : text.index("### A shared model cache")]
    assert "30 learners" in sizing and "getrusage" in sizing
    labs = re.findall(r"^\| (\d\d)_\w+ \|", sizing, flags=re.M)
    assert labs == [p.name[:2] for p in sorted((ROOT / "solutions").glob("*.ipynb"))], labs


def test_every_lab_of_the_sizing_table_is_measured_and_the_limit_covers_the_largest() -> None:
    """No row left to be measured (a '-'), and the recommended ``mem_limit`` covers the largest kernel tree."""
    text = GUIDE.read_text(encoding="utf-8")
    sizing = text[text.index("### Sizing a JupyterHub") : text.index("### A shared model cache")]
    rows = [r.split("|")[2:5] for r in re.findall(r"^\| \d\d_\w+ \|.*$", sizing, flags=re.M)]
    assert rows and all(re.match(r"\s*\d+(\.\d+)?\b", cell) for row in rows for cell in row), rows
    tree_mb = max(int(re.match(r"\s*(\d+)", row[2]).group(1)) for row in rows)  # type: ignore[union-attr]
    limit_gb = float(re.search(r'mem_limit = "(\d+(?:\.\d+)?)G"', sizing).group(1))  # type: ignore[union-attr]
    assert limit_gb * 1024 >= tree_mb + 84, (limit_gb, tree_mb)  # + the learner's Jupyter server
