"""Static checks of the notebooks in solutions/ and labs/ (fast; nbval runs them, see the Makefile).

Every notebook is stored clean (no outputs, execution counts or widget state: they are noise in
git, and saved widget state does not even render on open), starts with a title and a question,
and uses only what renders everywhere (widgets.link, not jslink; no ipympl).
"""

from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for d in ("solutions", "labs") for p in (REPO / d).glob("*.ipynb"))


def _id(p):
    return f"{p.parent.name}/{p.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[_id(p) for p in NOTEBOOKS])
def test_notebook_is_valid_and_stored_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert "widgets" not in nb.metadata, "saved widget state: strip it (pagedlab labs build does, for labs/)"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"cell {i} has stored outputs; clear them before saving"
            assert cell.execution_count is None, f"cell {i} has an execution count; clear outputs before saving"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[_id(p) for p in NOTEBOOKS])
def test_notebook_opens_with_a_question(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.lstrip().startswith("# ")
    assert "?" in first.source, "the first cell should state the lab's question"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[_id(p) for p in NOTEBOOKS])
def test_notebook_uses_portable_widgets_only(path):
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert "jslink" not in code, "use widgets.link (kernel side): jslink fails outside the browser and in Colab"
    assert "ipympl" not in code and "%matplotlib widget" not in code, "no ipympl: plots must be static PNGs"
