"""The Chinese edition in a real browser: JupyterLab 4 + Debian's Chromium (Playwright), lab 02 and lab 00 (both
player-heavy) translated (the solutions with solutions/zh/*.po applied and the language cell first, as
labs/zh/ has them), Run All, every player played to its end, then: Chinese text in the pictures and widgets, and
no text clipped - every SVG <text> lies inside its picture, and no widget button or label with Chinese text cuts it off.
Screenshots: tests/artifacts/screenshots/zh_<notebook>.png. The machinery (server, browser, Run All) is
tests/browser/test_labs_browser.py's."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from pagedlab.i18n import notebooks
from tests.browser import test_labs_browser as base

REPO = base.REPO
ZH_NOTEBOOKS = [REPO / "solutions" / f"{n}.ipynb" for n in ("02_block_pool", "00_welcome")]

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.model]

#: Every SVG text's box against its picture's viewBox, every clipped widget label, and the Chinese found.
JS_CLIPPED = """() => {
  const out = {svg_texts: 0, cjk_texts: 0, clipped: [], cjk_widgets: 0};
  const cjk = /[\\u4e00-\\u9fff]/;
  for (const svg of document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) svg.pl-viz')) {
    const vb = svg.viewBox.baseVal;
    if (!vb || !vb.width) continue;
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      out.svg_texts++;
      if (cjk.test(t.textContent)) out.cjk_texts++;
      const b = t.getBBox();
      const tol = 1.0;
      if (b.x < vb.x - tol || b.y < vb.y - tol || b.x + b.width > vb.x + vb.width + tol || b.y + b.height > vb.y + vb.height + tol)
        out.clipped.push({text: t.textContent.slice(0, 60), box: [b.x, b.y, b.width, b.height].map(v => Math.round(v)),
                          view: [vb.width, vb.height], cls: svg.getAttribute('class')});
    }
  }
  const sel = '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output :is(button, .widget-label, .widget-html-content, .widget-readout)';
  for (const el of document.querySelectorAll(sel)) {
    if (!el.offsetParent || !el.textContent.trim()) continue;
    if (cjk.test(el.textContent)) out.cjk_widgets++;
    const style = getComputedStyle(el);
    const hides = ['hidden', 'clip'].includes(style.overflowX) || style.textOverflow === 'ellipsis';
    // this edition's text (Chinese); the English widgets' own fit is test_labs_browser's and quiz.py's business
    if (hides && cjk.test(el.textContent) && el.scrollWidth > el.clientWidth + 1)
      out.clipped.push({text: el.textContent.trim().slice(0, 60), widget: el.className, scroll: el.scrollWidth, client: el.clientWidth});
  }
  return out;
}"""


@pytest.fixture(scope="module")
def zh_server():
    """A JupyterLab on a temp kit whose solutions/ holds the Chinese notebooks."""
    if base._chromium() is None:
        pytest.skip("chromium not found (apt-get install -y --no-install-recommends chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="pagedlab-zh-browser-"))
    root = tmp / "kit"
    (root / "solutions").mkdir(parents=True)
    for nb in ZH_NOTEBOOKS:
        entries = notebooks.read(notebooks.catalog_path(nb, "zh"))
        zh, _ = notebooks.translate_notebook(json.loads(nb.read_text(encoding="utf-8")), entries, "zh")
        (root / "solutions" / nb.name).write_text(json.dumps(zh, ensure_ascii=False), encoding="utf-8")
    (root / "data").symlink_to(REPO / "data")
    try:
        with base.serve_jupyter(
            "jupyterlab",
            root,
            tmp,
            ["--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        ) as url:
            yield url
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def zh_browser(zh_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=base._chromium(), args=base.CHROMIUM_ARGS, timeout=60_000)
        try:
            yield b
        finally:
            b.close()


def _play_all(page) -> int:
    """Move every player to its last frame (the slider's End key, through the kernel); returns how many there were."""
    players = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .pl-player")
    base._wait(lambda: players.count() > 0, 30, "the kit's players to render")
    for k in range(players.count()):
        player = players.nth(k)
        player.scroll_into_view_if_needed()
        last = player.evaluate(base.JS_PLAYER)["frames"] - 1
        if last > 0:
            player.locator(".noUi-handle").first.focus()
            page.keyboard.press("End")
            base._wait(
                lambda p=player, n=last: p.evaluate(base.JS_PLAYER)["frame"] == n, 60, f"player {k}'s last frame"
            )
    return players.count()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("notebook", ZH_NOTEBOOKS, ids=[p.stem for p in ZH_NOTEBOOKS])
def test_chinese_lab_runs_with_chinese_text_and_nothing_clipped(zh_server, zh_browser, notebook):
    base.SHOTS.mkdir(parents=True, exist_ok=True)
    context = zh_browser.new_context(viewport={"width": 1280, "height": 1000}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        base._open_and_run_all(page, zh_server, notebook, time.monotonic())
        prose = page.inner_text(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell")
        assert "实验" in prose, "the markdown cells are not the Chinese ones"
        at_start = page.evaluate(JS_CLIPPED)
        players = _play_all(page)
        assert players >= 2, f"{notebook.name}: expected its players, found {players}"
        found = page.evaluate(JS_CLIPPED)
        found["clipped"] = at_start["clipped"] + found["clipped"]
        page.screenshot(path=str(base.SHOTS / f"zh_{notebook.stem}.png"), full_page=False)
        assert found["svg_texts"] > 20, found
        assert found["cjk_texts"] + found["cjk_widgets"] > 0, f"no Chinese text in the pictures or widgets: {found}"
        assert not found["clipped"], f"{notebook.name}: clipped text: {found['clipped'][:8]}"
    finally:
        base._shutdown_kernels(zh_server)
        context.close()
