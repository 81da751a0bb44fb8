"""Every relative link in a lab notebook resolves inside the folder the labs are opened from.

`make lab` serves labs/ only (Jupyter's root_dir) and `pagedlab labs copy DIR` ships only what the wheel
holds, so a link like ``../docs/bugs.md`` is dead in both: it must name a file in the labs folder itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pagedlab.course.labs_build import LAB_PAGES, copy_labs

ROOT = Path(__file__).resolve().parents[1]
LABS = ROOT / "labs"
LINK = re.compile(r"\]\(([^)\s]+)\)|(?:src|href)=[\"']([^\"']+)[\"']")


def relative_links(folder: Path) -> list[tuple[str, str]]:
    """``(notebook, target)`` for every relative link in the markdown cells of ``folder/*.ipynb``."""
    out = []
    for nb_path in sorted(folder.glob("*.ipynb")):
        for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for m in LINK.finditer("".join(cell["source"])):
                target = m.group(1) or m.group(2)
                if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("#"):
                    out.append((nb_path.name, target))
    return out


def dead_links(folder: Path) -> list[str]:
    """Links whose file is missing or lies outside ``folder`` (Jupyter cannot serve it there)."""
    dead = []
    root = folder.resolve()
    for nb, target in relative_links(folder):
        file = (folder / target.split("#")[0]).resolve()
        if not file.is_file() or root not in file.parents:
            dead.append(f"{nb}: {target}")
    return dead


def test_the_labs_do_link_somewhere():
    # The check below is vacuous if no link is found (labs 06 and 07 cite docs/bugs.md entries).
    assert {nb for nb, t in relative_links(LABS) if t.startswith("bugs.md#")} >= {
        "06_preemption.ipynb",
        "07_prefix_caching.ipynb",
    }


def test_every_relative_link_resolves_in_the_labs_folder():
    assert dead_links(LABS) == []


def test_every_relative_link_resolves_after_labs_copy(tmp_path):
    copy_labs(tmp_path / "course", source=LABS)
    assert dead_links(tmp_path / "course") == []


@pytest.mark.parametrize("name", sorted(LAB_PAGES))
def test_shipped_pages_are_the_docs_text(name):
    # labs/bugs.md is written by `pagedlab labs build` from docs/; a stale copy fails `labs check` too.
    assert (LABS / name).read_text(encoding="utf-8") == (ROOT / LAB_PAGES[name]).read_text(encoding="utf-8")


def test_wheel_ships_the_pages():
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    patterns = data["package-data"]["pagedlab._labs"]
    assert all(any(Path(name).match(p) for p in patterns) for name in LAB_PAGES)
