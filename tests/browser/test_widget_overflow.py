"""No clipped control text in the labs' widgets: every button and label shows its whole text.

ipywidgets gives a ``Button`` a fixed width and cuts longer text with an ellipsis ("Lock in my
predic..."). This test renders, in JupyterLab and Debian's Chromium (the browser harness of
``test_labs_browser.py``), every prediction the labs ask (question, choices and unit read from
``solutions/*.ipynb``; numeric ones among them), every lab's self-check and a frame player (its Play,
slider and Prev/Next controls), then measures each button, toggle button and
label: its text must fit (``scrollWidth <= clientWidth``), and no widget row may be wider than the
output area it sits in.
"""

from __future__ import annotations

import ast
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from runall import run_all_cells
from test_labs_browser import CHROMIUM_ARGS, TOKEN, _chromium, serve_jupyter

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: Every element whose text could be cut, and every row of widgets that could run past its output.
JS_OVERFLOW = """() => {
  const out = [];
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const sel = 'button, label, .widget-label, .widget-readout, .widget-toggle-button, .widget-html-content';
  for (const el of panel.querySelectorAll('.jp-OutputArea-output ' + sel.split(', ').join(', .jp-OutputArea-output '))) {
    if (el.offsetParent === null) continue;  // not displayed
    if (el.scrollWidth > el.clientWidth + 1)
      out.push({kind: 'clipped', tag: el.tagName, cls: el.className, text: el.innerText, scroll: el.scrollWidth, client: el.clientWidth});
  }
  for (const area of panel.querySelectorAll('.jp-OutputArea-output')) {
    const right = area.getBoundingClientRect().right;
    for (const el of area.querySelectorAll('.jupyter-widgets')) {
      const r = el.getBoundingClientRect();
      if (el.offsetParent !== null && r.right > right + 1)
        out.push({kind: 'past the output', cls: el.className, text: el.innerText.slice(0, 80), right: r.right, limit: right});
    }
  }
  const n = panel.querySelectorAll('.jp-OutputArea-output button').length;
  return {problems: out, buttons: n};
}"""


def lab_predictions() -> list[dict[str, object]]:
    """Each ``predict(...)`` call of the solution notebooks as keyword arguments, its choices evaluated
    from the literal constants of the cell (``SHARES = {...}``; ``list(SHARES)``)."""
    found = []
    for nb in sorted((REPO / "solutions").glob("*.ipynb")):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] != "code" or "predict(" not in src:
                continue
            tree = ast.parse("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))))
            names: dict[str, object] = {"list": list}
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    try:
                        names[node.targets[0].id] = ast.literal_eval(node.value)
                    except ValueError:
                        pass
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "predict":
                    args = [eval(compile(ast.Expression(a), nb.name, "eval"), {}, names) for a in node.args]  # noqa: S307
                    kw = {
                        k.arg: eval(compile(ast.Expression(k.value), nb.name, "eval"), {}, names) for k in node.keywords
                    }  # noqa: S307
                    found.append(
                        {"lab": nb.stem, "question": args[0], "choices": args[1] if len(args) > 1 else None, **kw}
                    )
    return found


def _notebook(predictions: list[dict[str, object]]) -> dict[str, object]:
    cells = [
        "from IPython.display import display\n"
        "from pagedlab.analysis.self_checks import SELF_CHECKS, lab_self_check\n"
        "from pagedlab.viz.quiz import predict",
        "for lab in sorted(SELF_CHECKS):\n    display(lab_self_check(lab))",
        # a player as the labs build one (Play, the frame slider, Prev/Next, a caption per frame)
        "from pagedlab.viz.player import Player\n"
        'Player([f\'<svg width="240" height="40"><text x="4" y="24">frame {i}</text></svg>\' for i in range(4)],\n'
        "       caption=lambda s, i: f'engine step {2 * i}: the caption of frame {i}')",
    ]
    for p in predictions:
        kw = {k: v for k, v in p.items() if k not in ("lab", "question", "choices")}
        cells.append(f"predict({p['question']!r}, {p['choices']!r}, **{kw!r})")
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": s}
            for i, s in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_every_lab_prediction_is_found() -> None:
    preds = lab_predictions()
    labs = {p["lab"] for p in preds}
    assert len(preds) >= 20 and len(labs) == 10, (len(preds), sorted(labs))
    assert all(isinstance(p["question"], str) for p in preds)
    assert any(p["choices"] is None for p in preds) and any(p["choices"] for p in preds)


@pytest.fixture(scope="module")
def widgets_lab() -> Iterator[tuple[str, str]]:
    """A JupyterLab on a temp folder holding one notebook with every lab's prediction; yields (base URL, name)."""
    if _chromium() is None:
        pytest.skip("chromium not found (apt-get install -y --no-install-recommends chromium)")
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("jupyterlab")
    tmp = Path(tempfile.mkdtemp(prefix="pagedlab-overflow-"))
    root = tmp / "kit"
    root.mkdir()
    name = "widgets.ipynb"
    (root / name).write_text(json.dumps(_notebook(lab_predictions())))
    try:
        with serve_jupyter(
            "jupyterlab", root, tmp, ["--LabApp.news_url=None", "--LabApp.extension_manager=readonly"]
        ) as base:
            yield base, name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.timeout(600)
def test_no_widget_text_is_clipped(widgets_lab: tuple[str, str]) -> None:
    from playwright.sync_api import sync_playwright

    base, name = widgets_lab
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, timeout=60_000)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{base}/lab/tree/{name}?token={TOKEN}", timeout=90_000)
            page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell", timeout=90_000)
            page.wait_for_timeout(3000)  # kernel start-up
            run_all_cells(page, 300)
            page.wait_for_timeout(2000)  # widget views attach just after the kernel is done
            found = page.evaluate(JS_OVERFLOW)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "widget_overflow.png"), full_page=True)
        finally:
            browser.close()
    # every prediction's lock button was measured, and the player's Play, Prev and Next
    assert found["buttons"] >= len(lab_predictions()) + 3, found
    assert not found["problems"], json.dumps(found["problems"], indent=1)
