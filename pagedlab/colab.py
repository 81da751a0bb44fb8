"""The setup cell every lab begins with: Google Colab installs the kit; everywhere else it does nothing.

Each notebook's first code cell (right after its title) is :data:`SETUP_CELL`. In JupyterLab, Jupyter
Notebook 7 or VS Code the kit is already installed (``make lab``, ``pip install``, conda, Binder) and the
cell does nothing. In Google Colab (detected by ``"google.colab" in sys.modules``) it

1. installs the kit with pip from :data:`KIT_SOURCE` if ``import pagedlab`` would fail. The kit is **not on
   PyPI** (a different project may own the name there), so it is installed from its git repository, whose
   URL is the one setting of :mod:`pagedlab.routes` (``[project.urls] Repository``; unset, the cell says so);
   the base dependencies are ranges (pyproject.toml), so Colab's own torch, transformers and ipywidgets
   are kept, not reinstalled;
2. calls :func:`setup`, which fetches and verifies the model (``pagedlab fetch-model``, idempotent:
   a verified file is not fetched again) and enables Colab's custom widget manager, without which
   ipywidgets 8 widgets (the labs' players) do not render there.

The install step must live in the cell (the library is not importable before it); everything after it
lives here. ``python -m pagedlab.colab solutions/`` inserts or refreshes the cell in every notebook
(idempotent: the cell is found by its tag); run ``pagedlab labs build`` afterwards.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pagedlab.errors import ModelFetchError, PagedLabError
from pagedlab.model import fetch as model_fetch
from pagedlab.routes import UNSET, kit_requirement, links_markdown, repository_url

#: Cell tag that marks the setup cell (kept by ``pagedlab labs build``).
SETUP_TAG = "pagedlab-setup"
#: Cell tag of the markdown cell of "Open in Colab" / Binder links right after the setup cell.
ROUTES_TAG = "pagedlab-routes"


def setup_cell(url: str | None) -> str:
    """The setup cell's source for repository ``url`` (:func:`pagedlab.routes.repository_url`).

    With a URL, Colab pip-installs :func:`pagedlab.routes.kit_requirement` when the kit is missing; with
    none, the cell says exactly that in Colab (:data:`pagedlab.routes.UNSET`) instead of installing from a
    made-up address.
    """
    head = (
        "# Setup. In Google Colab this installs pagedlab and its model (a few minutes, once per session).\n"
        "# In JupyterLab, Notebook 7 or VS Code, with the kit installed, it does nothing.\n"
        "import sys\n\n"
        'if "google.colab" in sys.modules:\n'
        "    import importlib, importlib.util, subprocess\n"
    )
    if url is None:
        install = (
            '    if importlib.util.find_spec("pagedlab") is None:\n'
            f'        raise RuntimeError("pagedlab is not installed here, and this lab cannot install it: {UNSET}. '
            "Install it yourself (!pip install <the kit's wheel or git URL>), then run this cell again.\")\n"
        )
    else:
        install = (
            f'    KIT = "{kit_requirement(url)}"\n'
            '    if importlib.util.find_spec("pagedlab") is None:\n'
            '        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", KIT], capture_output=True, text=True)\n'
            "        if pip.returncode != 0:\n"
            '            raise RuntimeError(f"could not install {KIT} (is the runtime online?). pip said:\\n{pip.stderr[-1500:]}")\n'
            "        importlib.invalidate_caches()\n"
        )
    return head + install + "    import pagedlab.colab\n    pagedlab.colab.setup()"


#: The repository the routes point at (``[project.urls] Repository``; None: unset).
REPOSITORY_URL = repository_url()
#: Where Colab installs the kit from (a pip requirement), or None while no repository URL is set.
KIT_SOURCE = kit_requirement(REPOSITORY_URL) if REPOSITORY_URL else None
SETUP_CELL = setup_cell(REPOSITORY_URL)


class ColabSetupError(PagedLabError, RuntimeError):
    """The Colab setup could not finish (model download failed, widget manager unavailable)."""


def in_colab() -> bool:
    """True inside a Google Colab runtime (its ``google.colab`` package is imported at start-up)."""
    return "google.colab" in sys.modules


def _enable_colab_widgets() -> None:
    """``google.colab.output.enable_custom_widget_manager()``: lets Colab render ipywidgets 8."""
    # lazy: optional dependency (google.colab exists only on Colab)
    from google.colab import output  # only inside Colab; no stubs (ignore_missing_imports)

    output.enable_custom_widget_manager()


def setup(fetch: Callable[[], Path] | None = None, enable_widgets: Callable[[], None] | None = None) -> str:
    """Make this runtime ready for the labs; a no-op outside Colab.

    Args:
        fetch: fetches and verifies the model (default :func:`pagedlab.model.fetch.fetch_model`).
        enable_widgets: turns on Colab's custom widget manager (default: Colab's own function).

    Returns:
        A one-line summary (also printed in Colab).

    Raises:
        ColabSetupError: the model could not be fetched (e.g. the runtime is offline), or an older ipywidgets
            is already imported in this session (restart it); the message says what failed and how to retry.
    """
    if not in_colab():
        return "not in Colab: nothing to do"
    if fetch is None:
        fetch = model_fetch.fetch_model  # looked up at the call (tests replace it)
    try:
        model = fetch()
    except ModelFetchError as e:
        raise ColabSetupError(
            f"could not fetch the model in Colab ({e}). Check that the runtime is connected "
            "to the internet (Runtime > Restart session), then run this cell again."
        ) from e
    loaded = getattr(sys.modules.get("ipywidgets"), "__version__", None)
    if loaded is not None and not str(loaded).startswith("8."):
        raise ColabSetupError(
            f"this session imported ipywidgets {loaded} before the kit installed ipywidgets 8; "
            "Runtime > Restart session, then run this cell again"
        )
    (enable_widgets or _enable_colab_widgets)()
    line = f"pagedlab ready in Colab: model {model}, custom widget manager enabled"
    print(line)
    return line


def insert_setup_cell(nb: Any, url: str | None = REPOSITORY_URL, path: str | None = None) -> bool:
    """Put the setup cell right after the title cell of notebook ``nb`` (an nbformat node), in place, and the
    cell of cloud links (:func:`pagedlab.routes.links_markdown`, tagged :data:`ROUTES_TAG`) right after it.

    ``path`` is the lab's path in the repository (``labs/NN_name.ipynb``), which the links open; without it
    no links cell is written. Idempotent: existing tagged cells are refreshed and moved there; a second call changes nothing.
    Returns whether ``nb`` changed.

    Raises:
        ValueError: the notebook has no cells (no title to put the setup cell after).
    """
    import nbformat  # lazy: start-up time (only the notebook setup writes notebooks)

    if not nb.cells:
        raise ValueError("notebook has no cells: expected a title cell first")
    source = setup_cell(url)
    links = links_markdown(path, url) if path else None

    def tagged(tag: str) -> list[int]:
        return [i for i, c in enumerate(nb.cells) if tag in c.get("metadata", {}).get("tags", [])]

    want_links = links is not None
    found, found_links = tagged(SETUP_TAG), tagged(ROUTES_TAG)
    if (
        found == [1]
        and nb.cells[1].source == source
        and nb.cells[1].cell_type == "code"
        and (found_links == ([2] if want_links else []))
        and (not want_links or nb.cells[2].source == links)
    ):
        return False
    for i in sorted(found + found_links, reverse=True):
        del nb.cells[i]
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [SETUP_TAG]})
    cell["id"] = SETUP_TAG
    nb.cells.insert(1, cell)
    if want_links:
        md = nbformat.v4.new_markdown_cell(links, metadata={"tags": [ROUTES_TAG]})
        md["id"] = ROUTES_TAG
        nb.cells.insert(2, md)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pagedlab.colab [FOLDER or NOTEBOOK ...]``: insert/refresh the setup cell (default: solutions/)."""
    import nbformat  # lazy: start-up time (only the notebook setup writes notebooks)

    ap = argparse.ArgumentParser(prog="python -m pagedlab.colab", description=main.__doc__)
    ap.add_argument("paths", nargs="*", type=Path, default=[Path("solutions")])
    args = ap.parse_args(argv)
    notebooks: list[Path] = []
    for p in args.paths:
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such notebook or folder")
        notebooks += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        changed = insert_setup_cell(nb, path=f"labs/{path.name}")
        if changed:
            nbformat.write(nb, path)
        print(f"  {path}: {'setup cell written' if changed else 'up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
