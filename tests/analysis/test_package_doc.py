"""pagedlab.analysis's docstring is its table of contents: it names every module of the package."""

from __future__ import annotations

import pkgutil

import pagedlab.analysis


def test_the_package_docstring_names_every_module() -> None:
    doc = pagedlab.analysis.__doc__ or ""
    modules = sorted(m.name for m in pkgutil.iter_modules(pagedlab.analysis.__path__))
    assert "lab08" in modules  # the package is where it is expected (the check below is not vacuous)
    missing = [m for m in modules if f"``{m}``" not in doc]
    assert not missing, f"pagedlab/analysis/__init__.py's docstring does not name {missing}"
