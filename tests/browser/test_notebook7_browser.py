"""The labs' widgets render in Jupyter Notebook 7 too (not only JupyterLab): one lab, in Debian's Chromium.

Serves a temp folder holding one solution notebook with ``jupyter notebook`` (Notebook 7, isolated config and
settings as in test_labs_browser.py), opens it at ``/notebooks/...``, runs Run > Run All Cells, and checks: no
error output, no widget fallback text, the kit's player shows an SVG frame, and Next moves it one frame (the
kernel-side link works). The notebook is lab 01 (its "Run All" is the shortest of the labs with a widget).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from runall import run_all_cells
from test_labs_browser import CHROMIUM_ARGS, FALLBACK_TEXTS, JS_PLAYER, TOKEN, _chromium, _wait, serve_jupyter

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "solutions" / "01_kv_cache_fragmentation.ipynb"
ARTIFACTS = REPO / "tests" / "artifacts"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def notebook7() -> Iterator[str]:
    """A Notebook 7 server on a temp folder with lab 01; yields its base URL. Killed in ``finally``."""
    if _chromium() is None:
        pytest.skip("chromium not found (apt-get install -y --no-install-recommends chromium)")
    pytest.importorskip("notebook", reason="Notebook 7 is not installed (pip install -c requirements.lock notebook)")
    pytest.importorskip("playwright.sync_api")
    tmp = Path(tempfile.mkdtemp(prefix="pagedlab-nb7-"))
    root = tmp / "kit"
    root.mkdir()
    shutil.copy2(NOTEBOOK, root / NOTEBOOK.name)
    try:
        with serve_jupyter("notebook", root, tmp, []) as base:
            yield base
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.timeout(600)
def test_lab_widget_renders_and_steps_in_notebook7(notebook7: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, timeout=60_000)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{notebook7}/notebooks/{NOTEBOOK.name}?token={TOKEN}", timeout=90_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            page.wait_for_function("() => /Python/.test(document.body.innerText)", timeout=90_000)
            page.wait_for_timeout(3000)  # kernel start-up
            run_all_cells(page, 420)
            page.wait_for_timeout(1500)  # widget views attach just after the kernel is done
            text = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").inner_text()
            shown = [bad for bad in FALLBACK_TEXTS if bad in text]
            assert not shown, f"widget front end missing in Notebook 7 (the page shows {shown})"
            players = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .pl-player")
            _wait(
                lambda: players.count() > 0 and page.locator(".pl-player .pl-frame svg").count() >= players.count(),
                30,
                "the kit's widget (.pl-player with an SVG frame) to render",
            )
            player = players.first
            player.scroll_into_view_if_needed()
            first = player.evaluate(JS_PLAYER)
            assert first["frames"] > 1 and first["frame"] == 0 and first["svg"]
            player.locator(".pl-next").first.click()
            _wait(lambda: player.evaluate(JS_PLAYER)["frame"] == 1, 20, "Next to show frame 1")
            assert player.evaluate(JS_PLAYER)["svg"] != first["svg"]
            (ARTIFACTS / "screenshots").mkdir(parents=True, exist_ok=True)
            player.screenshot(path=str(ARTIFACTS / "screenshots" / "notebook7_01_widget.png"))
        except BaseException:
            (ARTIFACTS / "screenshots").mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "screenshots" / "notebook7_failure.png"))
            raise
        finally:
            browser.close()
