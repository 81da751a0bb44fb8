"""docs/instructor_guide.md says what the code does: its exercise table is the registry's (every exercise), and
every message its troubleshooting table quotes is one the code emits (issue 22, item 6).

``PAGEDLAB_REGEN_DOCS=1 pytest tests/grading/test_guide.py`` rewrites the exercise table."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from pagedlab.grading import registry
from pagedlab.grading.guide import TABLE_BEGIN, TABLE_END, exercise_table
from pagedlab.vllm_version import VLLM_REQUIREMENT

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "instructor_guide.md"
#: A learner's idle Jupyter server (MB), as the guide's sizing section measured and quotes it.
JUPYTER_SERVER_MB = 94


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
    assert labs == 2 * [p.name[:2] for p in sorted((ROOT / "solutions").glob("*.ipynb"))], labs  # without, with vLLM


def test_every_lab_of_the_sizing_table_is_measured_and_the_limit_covers_the_largest() -> None:
    """No row left to be measured (a '-'), and each recommended ``mem_limit`` (without real vLLM, then with it)
    covers the largest kernel tree of its table."""
    text = GUIDE.read_text(encoding="utf-8")
    sizing = text[text.index("### Sizing a JupyterHub") : text.index("### A shared model cache")]
    tables = [t for t in re.split(r"<!-- BEGIN lab_footprint\w*\.md -->", sizing)[1:]]
    limits = [float(g) for g in re.findall(r'mem_limit = "(\d+(?:\.\d+)?)G"', sizing)]
    assert len(tables) == 2 and len(limits) >= 2, (len(tables), limits)
    for table, limit_gb in zip(tables, limits, strict=False):
        rows = [r.split("|")[2:5] for r in re.findall(r"^\| \d\d_\w+ \|.*$", table, flags=re.M)]
        assert len(rows) == 10 and all(re.match(r"\s*\d+(\.\d+)?\b", cell) for row in rows for cell in row), rows
        # the larger of the kernel's exact peak and the sampled tree, + the learner's Jupyter server
        peak_mb = max(int(re.match(r"\s*(\d+)", cell).group(1)) for row in rows for cell in row[1:])  # type: ignore[union-attr]
        assert limit_gb * 1024 >= peak_mb + JUPYTER_SERVER_MB, (limit_gb, peak_mb)


def _footprint(stem: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """The meta and rows of ``benchmarks/results/<stem>.json`` and the table ``benchmarks/lab_footprint.py`` makes
    of the rows."""
    spec = importlib.util.spec_from_file_location("lab_footprint", ROOT / "benchmarks" / "lab_footprint.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = json.loads((ROOT / "benchmarks" / "results" / f"{stem}.json").read_text())
    return data["meta"], data["labs"], bench.markdown_table(data["labs"])


def test_the_sizing_figures_are_the_measured_ones() -> None:
    """The guide's two sizing tables are ``results/lab_footprint{,_vllm}.md`` verbatim, those files are the JSON's
    rows, each measured in its case (real vLLM or not), and the per-learner memory the prose works out starts from
    the largest measured figure (the kernel's exact peak or the sampled tree) plus the Jupyter server."""
    text = GUIDE.read_text(encoding="utf-8")
    sizing = text[text.index("### Sizing a JupyterHub") : text.index("### A shared model cache")]
    for stem in ("lab_footprint", "lab_footprint_vllm"):
        meta, rows, table = _footprint(stem)
        assert meta["vllm"].startswith(VLLM_REQUIREMENT + " at ") == stem.endswith("_vllm"), (stem, meta["vllm"])
        assert (ROOT / "benchmarks" / "results" / f"{stem}.md").read_text() == table, f"{stem}.md is not its JSON"
        begin, end = f"<!-- BEGIN {stem}.md -->\n", f"<!-- END {stem}.md -->"
        assert sizing[sizing.index(begin) + len(begin) : sizing.index(end)] == table, f"the guide's {stem} table"
        assert [r["notebook"][:2] for r in rows] == [p.name[:2] for p in sorted((ROOT / "solutions").glob("*.ipynb"))]
        peak = max(max(r["peak_rss_mb"], r["kernel_maxrss_mb"]) for r in rows)
        assert f"{peak} + {JUPYTER_SERVER_MB} = {peak + JUPYTER_SERVER_MB} MB" in sizing, (stem, peak)
    assert f"({JUPYTER_SERVER_MB} MB: `jupyter lab`" in sizing
