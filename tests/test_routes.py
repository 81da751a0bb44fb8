"""The cloud routes come from one setting, ``[project.urls] Repository`` (pagedlab.routes)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from pagedlab import colab, routes

ROOT = Path(__file__).resolve().parent.parent
URL = "https://github.com/example-owner/pagedlab"


def _pyproject(tmp_path: Path, urls: str) -> Path:
    p = tmp_path / "pyproject.toml"
    p.write_text(f'[project]\nname = "pagedlab"\n{urls}', encoding="utf-8")
    return p


def test_repository_url_read_from_project_urls(tmp_path: Path) -> None:
    assert routes.repository_url(_pyproject(tmp_path, f'[project.urls]\nRepository = "{URL}.git/"\n')) == URL
    assert routes.repository_url(_pyproject(tmp_path, "")) is None
    assert routes.repository_url(_pyproject(tmp_path, '[project.urls]\nHomepage = "https://x.org"\n')) is None
    with pytest.raises(ValueError, match="expected https://github.com/OWNER/REPO"):
        routes.repository_url(_pyproject(tmp_path, '[project.urls]\nRepository = "git@github.com:o/r"\n'))


def test_links_made_from_the_url() -> None:
    assert routes.colab_url("labs/00_welcome.ipynb", URL) == (
        "https://colab.research.google.com/github/example-owner/pagedlab/blob/main/labs/00_welcome.ipynb"
    )
    assert routes.binder_url("labs/00_welcome.ipynb", URL) == (
        "https://mybinder.org/v2/gh/example-owner/pagedlab/main?urlpath=lab%2Ftree%2Flabs%2F00_welcome.ipynb"
    )
    md = routes.links_markdown("labs/a.ipynb", URL)
    assert routes.colab_url("labs/a.ipynb", URL) in md and routes.binder_url("labs/a.ipynb", URL) in md
    assert routes.links_markdown("labs/a.ipynb", None) == f"*Cloud routes: {routes.UNSET}.*"


def test_every_lab_carries_the_links_of_the_current_setting() -> None:
    url = routes.repository_url()
    for path in sorted((ROOT / "labs").glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[2].source == routes.links_markdown(f"labs/{path.name}", url), (
            f"{path}: run `make routes` (python -m pagedlab.colab solutions; pagedlab labs build)"
        )
        assert colab.ROUTES_TAG in nb.cells[2].metadata.get("tags", [])


def test_readme_block_follows_the_setting() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert routes.readme_block(routes.repository_url()) in text, "run `make routes`"


def test_insert_cells_with_a_url_then_without() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("x = 1")])
    assert colab.insert_setup_cell(nb, URL, path="labs/t.ipynb") is True
    assert [c.source for c in nb.cells] == [
        "# T",
        colab.setup_cell(URL),
        routes.links_markdown("labs/t.ipynb", URL),
        "x = 1",
    ]
    assert 'KIT = "pagedlab @ git+https://github.com/example-owner/pagedlab.git@main"' in nb.cells[1].source
    assert colab.insert_setup_cell(nb, URL, path="labs/t.ipynb") is False
    assert colab.insert_setup_cell(nb, None, path="labs/t.ipynb") is True
    assert [c.source for c in nb.cells] == [
        "# T",
        colab.setup_cell(None),
        routes.links_markdown("labs/t.ipynb", None),
        "x = 1",
    ]
    assert "git+" not in nb.cells[1].source and routes.UNSET in nb.cells[1].source
    nbformat.validate(nb)
