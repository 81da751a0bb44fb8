"""The Chinese edition in a real browser: every lab, JupyterLab 4 + Debian's Chromium (Playwright).

Each lab is its solution notebook translated by its catalog (``solutions/zh/*.po`` applied and the language cell
first, as ``labs/zh/`` has them; the solutions, so that ``check()`` passes), all served by one JupyterLab for the
module, two labs at a time (``PAGEDLAB_ZH_BROWSER_JOBS``; each in its own page and kernel: a lab's kernel mostly
keeps one core busy, and CI has two); ``PAGEDLAB_ZH_BROWSER_LABS=00_welcome,02_block_pool`` runs some.

Per lab: Run All succeeds with no error output; every markdown cell the catalog translates is shown in
Chinese (counted against the translated notebook: an untranslated or stale catalog fails); every player is taken
to its last frame with the slider's End key (through the kernel); Chinese text is in the pictures or widgets;
nothing is clipped - every SVG ``<text>`` lies inside its picture's viewBox, and no widget button, label, HTML or
readout with Chinese text overflows a box that hides the overflow (checked before and after the players move).

What this run checks that the English one (tests/browser/test_labs_browser.py, whose server, browser and Run All
machinery this reuses) does not: the translated prose, check() messages, captions and pictures running and
fitting in Chinese (CJK width, fonts, text inside the SVG). What it leaves to the English run, because it does not
depend on the language: Play animating the frames, Prev/Next, widget text fallbacks and console messages about
missing models, predictions and self-checks answered by clicks, a saved lab reopened. That keeps this run to
Run All plus a few End keys per lab.

Timings per lab go to ``tests/artifacts/zh_browser_report.json``; screenshots to
``tests/artifacts/screenshots/zh_<lab>.png``. With ``PAGEDLAB_ZH_DOC_SCREENSHOTS=1`` the run also writes the
documentation's screenshots of labs 02 and 06 (``docs/screenshots/zh_lab02.png``, ``zh_lab06.png``: the first
player at its last frame, colour-quantized to stay small).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from pagedlab.i18n import notebooks
from tests.browser import test_labs_browser as base

REPO = base.REPO
_LABS = sorted((REPO / "solutions").glob("[0-9][0-9]_*.ipynb"))
_ONLY = [s.strip() for s in os.environ.get("PAGEDLAB_ZH_BROWSER_LABS", "").split(",") if s.strip()]
if set(_ONLY) - {p.stem for p in _LABS}:
    raise ValueError(f"PAGEDLAB_ZH_BROWSER_LABS names no lab: {sorted(set(_ONLY) - {p.stem for p in _LABS})}")
ZH_NOTEBOOKS = [p for p in _LABS if not _ONLY or p.stem in _ONLY]
#: labs run at once, each in its own page and kernel (CI's two cores: a lab's kernel mostly uses one)
JOBS = int(os.environ.get("PAGEDLAB_ZH_BROWSER_JOBS", "2"))
#: the documentation's screenshots (``PAGEDLAB_ZH_DOC_SCREENSHOTS=1``): lab stem -> file in docs/screenshots/
DOC_SHOTS = {"02_block_pool": "zh_lab02.png", "06_preemption": "zh_lab06.png"}
CJK = re.compile(r"[\u4e00-\u9fff]")

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

#: The rendered markdown cells of the open notebook: how many there are and how many hold Chinese.
JS_MARKDOWN = """() => {
  const cells = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell .jp-RenderedMarkdown')];
  return {cells: cells.length, cjk: cells.filter(c => /[\\u4e00-\\u9fff]/.test(c.textContent)).length};
}"""


def translated(solution: Path) -> dict:
    """The solution notebook with its zh catalog applied (:func:`pagedlab.i18n.notebooks.translate_notebook`)."""
    entries = notebooks.read(notebooks.catalog_path(solution, "zh"))
    zh, _ = notebooks.translate_notebook(json.loads(solution.read_text(encoding="utf-8")), entries, "zh")
    return zh


def chinese_markdown_cells(nb: dict) -> int:
    """How many markdown cells of ``nb`` hold Chinese (what the browser must show in Chinese)."""
    return sum(c["cell_type"] == "markdown" and bool(CJK.search("".join(c["source"]))) for c in nb["cells"])


@pytest.fixture(scope="module")
def zh_server():
    """One JupyterLab for every lab, on a temp kit whose solutions/ holds the Chinese notebooks."""
    if base._chromium() is None:
        pytest.skip("chromium not found (apt-get install -y --no-install-recommends chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="pagedlab-zh-browser-"))
    root = tmp / "kit"
    (root / "solutions").mkdir(parents=True)
    for nb in ZH_NOTEBOOKS:
        (root / "solutions" / nb.name).write_text(json.dumps(translated(nb), ensure_ascii=False), encoding="utf-8")
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


@pytest.fixture(scope="module")
def zh_report():
    """Seconds per lab (open, Run All, players, total), written to tests/artifacts/zh_browser_report.json."""
    data: dict = {"labs": {}, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    t0 = time.monotonic()
    yield data
    if data["labs"]:
        data["total_s"] = round(time.monotonic() - t0, 1)
        data["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
        (base.ARTIFACTS / "zh_browser_report.json").write_text(json.dumps(data, indent=2) + "\n")


def _players_to_end(page) -> int:
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


def _doc_screenshot(page, name: str) -> None:
    """``docs/screenshots/<name>``: the viewport with the first player, quantized to 64 colours (< 300 KB)."""
    from PIL import Image

    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .pl-player").first.scroll_into_view_if_needed()
    raw = base.SHOTS / f"doc_{name}"
    page.screenshot(path=str(raw), clip={"x": 0, "y": 0, "width": 1280, "height": 900})
    target = REPO / "docs" / "screenshots" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(raw) as im:
        im.convert("RGB").quantize(colors=64).save(target, optimize=True)
    assert target.stat().st_size < 300_000, f"{target}: {target.stat().st_size} bytes"


def _lab_checks(page, notebook: Path, state: dict, timings: dict) -> dict:
    """The checks of one Chinese lab whose Run All has finished (``state``: :func:`base._run_all_finished`'s);
    returns its report entry."""
    base._assert_no_error_output(notebook, state)
    zh = translated(notebook)
    expected_cjk = chinese_markdown_cells(zh)
    markdown = sum(c["cell_type"] == "markdown" for c in zh["cells"])
    generated = sum(
        c["cell_type"] == "markdown" and bool(notebooks.GENERATED_TAGS & set(c.get("metadata", {}).get("tags", [])))
        for c in zh["cells"]
    )
    # the catalog translates every markdown cell but the generated ones (the cloud-routes line stays as generated)
    assert expected_cjk == markdown - generated > 0, (
        f"{notebook.name}: {expected_cjk} of {markdown} markdown cells ({generated} generated) are in Chinese"
    )
    shown = page.evaluate(JS_MARKDOWN)
    assert shown["cells"] == markdown and shown["cjk"] == expected_cjk, (
        f"{notebook.name}: the browser shows {shown['cjk']} of {shown['cells']} markdown cells in Chinese, "
        f"the translated notebook has {expected_cjk} of {markdown}"
    )
    at_start = page.evaluate(JS_CLIPPED)
    t_players = time.monotonic()
    players = _players_to_end(page)
    timings["players_s"] = round(time.monotonic() - t_players, 1)
    assert players >= 1, f"{notebook.name}: no player rendered"
    found = page.evaluate(JS_CLIPPED)
    found["clipped"] = at_start["clipped"] + found["clipped"]
    page.screenshot(path=str(base.SHOTS / f"zh_{notebook.stem}.png"), full_page=False)
    if os.environ.get("PAGEDLAB_ZH_DOC_SCREENSHOTS") == "1" and notebook.stem in DOC_SHOTS:
        _doc_screenshot(page, DOC_SHOTS[notebook.stem])
    assert found["svg_texts"] > 0, found
    assert found["cjk_texts"] + found["cjk_widgets"] > 0, f"no Chinese text in the pictures or widgets: {found}"
    assert not found["clipped"], f"{notebook.name}: clipped text: {found['clipped'][:8]}"
    return {
        "players": players,
        "svg_texts": found["svg_texts"],
        "cjk_svg_texts": found["cjk_texts"],
        "cjk_widgets": found["cjk_widgets"],
        **timings,
    }


@pytest.mark.timeout(1800)
def test_every_chinese_lab_runs_with_chinese_text_and_nothing_clipped(zh_server, zh_browser, zh_report):
    """Every lab, JOBS at a time (each in its own page and kernel; the longest, the later labs, first): a lab's
    checks run as soon as its Run All has finished, while the others' kernels go on. Every lab is tried; the
    failures are reported together."""
    base.SHOTS.mkdir(parents=True, exist_ok=True)
    queue = list(reversed(ZH_NOTEBOOKS))
    running: dict[Path, tuple] = {}  # notebook -> (context, page, t_start, t_run, timings)
    failures: dict[str, str] = {}
    while queue or running:
        while queue and len(running) < JOBS:
            nb = queue.pop(0)
            context = zh_browser.new_context(viewport={"width": 1280, "height": 1000}, locale="zh-CN")
            page = context.new_page()
            page.set_default_timeout(60_000)
            t_start = time.monotonic()
            try:
                base._open_notebook(page, zh_server, nb)
                timings = {"open_s": round(time.monotonic() - t_start, 1)}
                base._start_run_all(page)
            except Exception as e:
                failures[nb.stem] = f"opening it: {e}"
                _close(zh_server, nb, context, page, failed=True)
                continue
            running[nb] = (context, page, t_start, time.monotonic(), timings)
        for nb, (context, page, t_start, t_run, timings) in list(running.items()):
            try:
                state = base._run_all_finished(page)
                if state is None:
                    if time.monotonic() - t_run > base.NB_TIMEOUT:
                        raise AssertionError(f"Run All did not finish in {base.NB_TIMEOUT:.0f} s")
                    continue
                timings["run_all_s"] = round(time.monotonic() - t_run, 1)
                entry = _lab_checks(page, nb, state, timings)
                entry["total_s"] = round(time.monotonic() - t_start, 1)
                zh_report["labs"][nb.stem] = entry
                _close(zh_server, nb, context, page)
            except Exception as e:
                failures[nb.stem] = str(e)
                _close(zh_server, nb, context, page, failed=True)
            del running[nb]
        time.sleep(1.0)
    zh_report["jobs"] = JOBS
    assert not failures, "Chinese labs that failed:\n" + "\n\n".join(f"{k}: {v}" for k, v in failures.items())
    assert sorted(zh_report["labs"]) == [p.stem for p in ZH_NOTEBOOKS]


def _close(server: str, notebook: Path, context, page, failed: bool = False) -> None:
    if failed:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(base.SHOTS / f"zh_{notebook.stem}_failure.png"))
    base._shutdown_kernels(server, notebook)
    context.close()
