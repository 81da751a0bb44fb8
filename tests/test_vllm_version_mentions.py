"""The labs quote the vLLM version the kit follows from its one place, pagedlab/vllm_version.py.

Fails when VLLM_VERSION moves and a lab's prose still names the old release as the one the kit follows,
or when a lab goes back to calling vLLM 0.11.0 its default meaning of "vLLM".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pagedlab.vllm_version import VLLM_VERSION

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "labs").glob("*.ipynb"))
#: "X.Y.Z, the release the kit follows" / "the release the kit follows, X.Y.Z" / "(`VLLM_VERSION`, X.Y.Z"
QUOTES = re.compile(
    r"(\d+\.\d+\.\d+), the release(?:\s+the)?\s+kit follows"
    r"|the release the kit follows\W+(?:\(`pagedlab/vllm_version\.py`[^)]*\)\W*)?(\d+\.\d+\.\d+)"
    r"|`VLLM_VERSION`, (\d+\.\d+\.\d+)"
)


def _markdown(nb: Path) -> str:
    cells = json.loads(nb.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_lab_names_the_version_the_kit_follows_from_its_one_place(nb: Path) -> None:
    text = _markdown(nb)
    assert f"`pagedlab/vllm_version.py` (`VLLM_VERSION`, {VLLM_VERSION};" in text, nb.name
    assert "means vLLM 0.11" not in text, nb.name
    quoted = [next(g for g in m.groups() if g) for m in QUOTES.finditer(text.replace("\n", " "))]
    assert quoted, nb.name
    assert set(quoted) == {VLLM_VERSION}, (nb.name, quoted)


def test_the_pattern_catches_a_stale_version() -> None:
    stale = "vLLM 0.31.0, the release the kit follows, and (`VLLM_VERSION`, 0.30.1; ...)"
    assert [next(g for g in m.groups() if g) for m in QUOTES.finditer(stale)] == ["0.31.0", "0.30.1"]
