"""The setup cell every lab begins with: Google Colab installs the kit; everywhere else it does nothing.

Each notebook's first code cell (right after its title) is :data:`SETUP_CELL`. In JupyterLab, Jupyter
Notebook 7 or VS Code the kit is already installed (``make lab``, ``pip install``, conda, Binder) and the
cell does nothing. In Google Colab (detected by ``"google.colab" in sys.modules``) it

1. installs the kit with pip from :data:`KIT_SOURCE` if ``import pagedlab`` would fail. The kit is **not on
   PyPI** (a different project may own the name there), so it is installed from its git repository;
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

#: Where Colab installs the kit from (a pip requirement). The repository had no public URL when this was
#: written: set it to where the kit is published, then rerun ``python -m pagedlab.colab solutions`` and
#: ``pagedlab labs build`` (the URL is written into every lab's setup cell).
KIT_SOURCE = "pagedlab @ git+https://github.com/pagedlab/pagedlab.git"
#: Cell tag that marks the setup cell (kept by ``pagedlab labs build``).
SETUP_TAG = "pagedlab-setup"

SETUP_CELL = f'''\
# Setup. In Google Colab this installs pagedlab and its model (a few minutes, once per session).
# In JupyterLab, Notebook 7 or VS Code, with the kit installed, it does nothing.
import sys

if "google.colab" in sys.modules:
    import importlib, importlib.util, subprocess
    KIT = "{KIT_SOURCE}"
    if importlib.util.find_spec("pagedlab") is None:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", KIT], capture_output=True, text=True)
        if pip.returncode != 0:
            raise RuntimeError(f"could not install {{KIT}} (is the runtime online?). pip said:\\n{{pip.stderr[-1500:]}}")
        importlib.invalidate_caches()
    import pagedlab.colab
    pagedlab.colab.setup()'''


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
        from pagedlab.model.fetch import fetch_model

        fetch = fetch_model
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


def insert_setup_cell(nb: Any) -> bool:
    """Put :data:`SETUP_CELL` right after the title cell of notebook ``nb`` (an nbformat node), in place.

    Idempotent: an existing cell tagged :data:`SETUP_TAG` is refreshed and moved there; a second call
    changes nothing. Returns whether ``nb`` changed.

    Raises:
        ValueError: the notebook has no cells (no title to put the setup cell after).
    """
    import nbformat  # lazy: start-up time (only the notebook setup writes notebooks)

    if not nb.cells:
        raise ValueError("notebook has no cells: expected a title cell first")
    found = [i for i, c in enumerate(nb.cells) if SETUP_TAG in c.get("metadata", {}).get("tags", [])]
    if found == [1] and nb.cells[1].source == SETUP_CELL and nb.cells[1].cell_type == "code":
        return False
    for i in reversed(found):
        del nb.cells[i]
    cell = nbformat.v4.new_code_cell(SETUP_CELL, metadata={"tags": [SETUP_TAG]})
    cell["id"] = SETUP_TAG
    nb.cells.insert(1, cell)
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
        changed = insert_setup_cell(nb)
        if changed:
            nbformat.write(nb, path)
        print(f"  {path}: {'setup cell written' if changed else 'up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
