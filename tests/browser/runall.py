"""Run > Run All Cells in an open Jupyter page (JupyterLab or Notebook 7: the same menu command), as the
browser tests run a notebook: wait until every code cell ran, fail on error output."""

from __future__ import annotations

from typing import Any

from test_labs_browser import _run_all_finished, _start_run_all, _wait


def run_all_cells(page: Any, timeout: float, what: str = "all cells to run") -> dict[str, Any]:
    """Click Run > Run All Cells and wait up to ``timeout`` seconds for every code cell to finish (the steps of
    test_labs_browser's ``_open_and_run_all``, which the Chinese labs' test also runs two pages at a time).

    Returns:
        The cells' state (``JS_CELL_STATE``: counts of cells, done, running).

    Raises:
        AssertionError: a cell shows error output (their texts), or the cells did not finish in time.
    """
    _start_run_all(page)
    state: dict[str, Any] = _wait(lambda: _run_all_finished(page), timeout, what, interval=1.0)
    assert not state["errors"], "error output:\n" + "\n---\n".join(state["errors"])
    return state
