"""Run > Run All Cells in an open Jupyter page (JupyterLab or Notebook 7: the same menu command), as the
browser tests run a notebook: wait until every code cell ran, fail on error output."""

from __future__ import annotations

from typing import Any

from test_labs_browser import JS_CELL_STATE, _wait


def run_all_cells(page: Any, timeout: float, what: str = "all cells to run") -> dict[str, Any]:
    """Click Run > Run All Cells and wait up to ``timeout`` seconds for every code cell to finish.

    Returns:
        The cells' state (``JS_CELL_STATE``: counts of cells, done, running).

    Raises:
        AssertionError: a cell shows error output (their texts), or the cells did not finish in time.
    """
    page.click(".lm-MenuBar-item:has-text('Run')")
    page.click(".lm-Menu-item[data-command='runmenu:run-all']")

    def finished() -> dict[str, Any] | None:
        st: dict[str, Any] = page.evaluate(JS_CELL_STATE)
        return st if st["errors"] or (st["n"] and st["done"] == st["n"] and st["running"] == 0) else None

    state = _wait(finished, timeout, what, interval=1.0)
    assert not state["errors"], "error output:\n" + "\n---\n".join(state["errors"])
    return state
