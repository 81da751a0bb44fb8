"""Where the kit's shipped files are: ``data/`` (traces, prompts) and the learner notebooks ``labs/``.

One helper for every caller (CLI, ``generate``, ``replay``, ``analysis``, the notebooks)::

    from pagedlab import data
    data.path("prompts.jsonl")          # -> Path of the kit's data/prompts.jsonl

The repository keeps ``data/`` and ``labs/`` at its top level (the layout is fixed). A wheel ships them
inside the package as ``pagedlab/_data`` and ``pagedlab/_labs`` (``[tool.setuptools] package-dir`` in
pyproject.toml maps them), so ``pip install`` gives a complete kit with no clone. Lookup order:

1. ``$PAGEDLAB_DATA_DIR`` (data only), for a folder of your own traces and prompts;
2. the installed package (``importlib.resources.files("pagedlab") / "_data"``): a wheel install;
3. the checkout next to the package (``<repo>/data``): an editable install or a source tree.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from pagedlab.errors import DataFileNotFoundError

#: Environment variable that replaces the kit's data folder.
DATA_DIR_ENV = "PAGEDLAB_DATA_DIR"


def _kit_dir(packaged: str, checkout: str) -> Path:
    """The packaged folder ``pagedlab/<packaged>`` if it exists, else the checkout's ``<checkout>``.

    Raises:
        DataFileNotFoundError: neither exists (a broken install).
    """
    inside = Path(str(files("pagedlab") / packaged))
    if inside.is_dir():
        return inside
    repo = Path(__file__).resolve().parents[1] / checkout
    if repo.is_dir():
        return repo
    raise DataFileNotFoundError(
        f"the kit's {checkout}/ folder is missing: looked in {inside} (wheel) and {repo} (checkout); reinstall pagedlab"
    )


def directory() -> Path:
    """The folder holding the kit's data files (``$PAGEDLAB_DATA_DIR`` if set, else the shipped ``data/``).

    Raises:
        DataFileNotFoundError: ``$PAGEDLAB_DATA_DIR`` names no folder, or the install lacks its data.
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        if not Path(env).is_dir():
            raise DataFileNotFoundError(f"${DATA_DIR_ENV}={env!r} is not a folder; unset it to use the kit's data")
        return Path(env)
    return _kit_dir("_data", "data")


def path(name: str) -> Path:
    """The path of the kit's data file ``name`` (e.g. ``"prompts.jsonl"``), checked to exist.

    Raises:
        DataFileNotFoundError: no such file; the message lists the files that are there.
    """
    base = directory()
    found = base / name
    if not found.is_file():
        have = sorted(p.name for p in base.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
        raise DataFileNotFoundError(f"data file {name!r} not found in {base}; the kit ships: {', '.join(have)}")
    return found


def labs_directory() -> Path:
    """The folder holding the learner notebooks (``labs/*.ipynb``) shipped with the kit.

    Raises:
        DataFileNotFoundError: the install lacks them.
    """
    return _kit_dir("_labs", "labs")
