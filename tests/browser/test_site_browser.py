"""The course site (``make site``) in Chromium with the network off: every lab page, every player animating.

The site is built by ``website/build.py`` into ``build/site/en`` (``PAGEDLAB_SITE_DIR`` names another
folder). ``make test`` (tests/run_suites.py) builds it beside the tests and exports ``PAGEDLAB_SITE_BUILD_RC``,
the file its exit status goes to; the fixture waits for that file (these tests are ordered last,
tests/conftest.py), fails with the build's log when the status is not 0,
or builds the site itself when neither a build nor a running build is there.

Per page, opened as ``file://`` with every other request recorded and refused (the page must need none):
no console error and no page error; every player that the page's saved widget state holds renders (no
text fallback); on each, Play moves the frames (the SVG changes), the slider's End/Home keys reach the
last and first frame, Next/Prev move one frame, all with no kernel. Page-level checks: the search box finds
a lab, MathJax typesets lab 06's formulas from the site's own copy, exercise cells show their stub and
never the solution, and ``check()`` cells show the "run this in Jupyter" note instead of a result.
Screenshots go to ``tests/artifacts/site/``.

The Chinese edition: ``make test``'s site build then builds two labs of it (``--lang zh --only ...``, into
``build/site/zh``; exit status to ``PAGEDLAB_SITE_ZH_BUILD_RC``, log ``site_build_zh.log``), and
:func:`test_chinese_pages_render_play_and_link_to_english` opens those pages offline: Chinese prose and
interface strings, every player playing (as above), no Chinese character drawn as a missing-glyph box, and the
language link opening the same page of the English site.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("PAGEDLAB_SITE_DIR", REPO / "build" / "site" / "en"))
SHOTS = REPO / "tests" / "artifacts" / "site"
CHROMIUM = os.environ.get("PAGEDLAB_CHROMIUM", "/usr/bin/chromium")
LABS = sorted((REPO / "solutions").glob("[0-9][0-9]_*.ipynb"))
PAGES = ["index.html" if i == 0 else p.stem + ".html" for i, p in enumerate(LABS)]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
FALLBACK_TEXTS = ["Loading widget", "VBox(children=", "HBox(children=", "Error displaying widget", "Model not found"]

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.model]

JS_PLAYER = """(el) => {
  const f = el.querySelector('.pl-frame');
  const svg = el.querySelector('.pl-frame svg');
  return {frame: f ? +f.dataset.frame : -1, frames: f ? +f.dataset.frames : -1,
          svg: svg ? svg.outerHTML : '',
          playing: !!el.querySelector('.widget-play button i.fa-pause')};
}"""


BUILD_LOG = REPO / "tests" / "artifacts" / "site_build.log"
ZH_SITE = Path(os.environ.get("PAGEDLAB_SITE_ZH_DIR", REPO / "build" / "site" / "zh"))
ZH_BUILD_LOG = REPO / "tests" / "artifacts" / "site_build_zh.log"
#: the labs of the Chinese edition built when make test has not (its SITE_ZH_LABS)
ZH_LABS = "00_welcome,02_block_pool"


def _wait_for_build(rc_file: Path, log: Path = BUILD_LOG) -> int:
    """The exit status of ``make test``'s background build, once it wrote it to ``rc_file``: at most 600 s more
    (the test's own limit is 900 s)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if rc_file.exists() and rc_file.read_text().strip():
            return int(rc_file.read_text().strip())
        time.sleep(2)
    pytest.fail(f"make test's background site build wrote no exit status to {rc_file} in 600 s more:\n{_log_tail(log)}")


def _log_tail(log: Path = BUILD_LOG) -> str:
    if not log.exists():
        return f"({log} does not exist)"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if "IPKernelApp" not in ln]
    return "\n".join(lines[-60:])


@pytest.fixture(scope="module")
def site() -> Path:
    rc_file = os.environ.get("PAGEDLAB_SITE_BUILD_RC", "")
    if rc_file:
        rc = _wait_for_build(Path(rc_file))
        if rc != 0 or not (SITE / "build.json").exists():
            pytest.fail(f"make test's background site build failed (exit {rc}; {BUILD_LOG}):\n{_log_tail()}")
    if not (SITE / "build.json").exists():
        if not (REPO / "website" / "node_modules").exists():
            pytest.fail("website/node_modules is missing: run `make site` (it runs `npm ci` in website/)")
        r = subprocess.run(
            [sys.executable, str(REPO / "website" / "build.py"), "--out", str(SITE)],
            capture_output=True,
            text=True,
            timeout=2400,
        )
        assert r.returncode == 0, f"website/build.py failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    return SITE


@pytest.fixture(scope="module")
def zh_site(site) -> Path:
    """The Chinese edition's pages that make test built (or ZH_LABS, built here), beside the English ``site``."""
    rc_file = os.environ.get("PAGEDLAB_SITE_ZH_BUILD_RC", "")
    if rc_file:
        rc = _wait_for_build(Path(rc_file), ZH_BUILD_LOG)
        if rc != 0 or not (ZH_SITE / "build.json").exists():
            pytest.fail(f"the background zh site build failed (exit {rc}; {ZH_BUILD_LOG}):\n{_log_tail(ZH_BUILD_LOG)}")
    if not (ZH_SITE / "build.json").exists():
        cmd = [sys.executable, str(REPO / "website" / "build.py"), "--lang", "zh", "--out", str(ZH_SITE)]
        r = subprocess.run([*cmd, "--only", ZH_LABS], capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, f"website/build.py --lang zh failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    return ZH_SITE


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _players_in_state(html: str) -> int:
    """How many ``pl-player`` widgets the page's saved widget state holds (what must render)."""
    m = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', html, re.S)
    if m is None:
        return 0
    state = json.loads(m.group(1))["state"]
    return sum("pl-player" in s["state"].get("_dom_classes", []) for s in state.values())


def _wait(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def _exercise_player(page, player, k: int, name: str) -> dict:
    """Play, the slider's keys and Prev/Next on one player; returns what was seen."""
    player.scroll_into_view_if_needed()
    first = player.evaluate(JS_PLAYER)
    assert first["frames"] >= 1 and first["svg"], f"{name} player {k}: no SVG frame shown"
    last = first["frames"] - 1
    if last == 0:
        return {"frames": 1}
    seen = {first["frame"]}
    svgs = {first["svg"]}
    player.locator(".widget-play button").first.click()  # Play

    def moved():
        st = player.evaluate(JS_PLAYER)
        seen.add(st["frame"])
        svgs.add(st["svg"])
        return len(seen) >= min(3, last + 1) and len(svgs) >= 2

    _wait(moved, 30, f"{name} player {k}: Play to change frames")
    if player.evaluate(JS_PLAYER)["playing"]:  # ipywidgets 8: the first button toggles play / pause
        player.locator(".widget-play button").first.click()
    _wait(lambda: not player.evaluate(JS_PLAYER)["playing"], 10, f"{name} player {k}: pause")
    handle = player.locator(".noUi-handle").first
    handle.focus()
    page.keyboard.press("End")
    _wait(lambda: player.evaluate(JS_PLAYER)["frame"] == last, 10, f"{name} player {k}: slider End")
    end_svg = player.evaluate(JS_PLAYER)["svg"]
    page.keyboard.press("Home")
    _wait(lambda: player.evaluate(JS_PLAYER)["frame"] == 0, 10, f"{name} player {k}: slider Home")
    player.locator(".pl-next").first.click()
    _wait(lambda: player.evaluate(JS_PLAYER)["frame"] == 1, 10, f"{name} player {k}: Next")
    player.locator(".pl-prev").first.click()
    _wait(lambda: player.evaluate(JS_PLAYER)["frame"] == 0, 10, f"{name} player {k}: Prev")
    readout = player.locator(".widget-readout").first.inner_text().strip()
    assert readout == "0", f"{name} player {k}: the slider's readout says {readout!r} at frame 0"
    return {"frames": first["frames"], "seen_while_playing": len(seen), "end_differs": end_svg != first["svg"]}


@pytest.mark.timeout(900)
def test_every_page_renders_offline_and_every_player_animates(site, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert sorted(p.name for p in site.glob("*.html")) == sorted(PAGES)
    report = {}
    for name in PAGES:
        html = (site / name).read_text(encoding="utf-8")
        expected = _players_in_state(html)
        ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
        page = ctx.new_page()
        outside: list[str] = []
        errors: list[str] = []

        def route(r, outside=outside):
            if r.request.url.startswith(("file://", "data:", "blob:")):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        try:
            page.goto((site / name).as_uri(), wait_until="load", timeout=60_000)
            players = page.locator(".pl-player")
            _wait(
                lambda: players.count() >= expected and page.locator(".pl-player .pl-frame svg").count() >= expected,
                60,
                f"{name}: {expected} players to render",
            )
            assert players.count() == expected, f"{name}: {players.count()} players shown, {expected} saved"
            text = "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())  # the prose may quote them
            shown = [t for t in FALLBACK_TEXTS if t in text]
            assert not shown, f"{name}: widget fallback text {shown} (the widget renderer did not run)"
            page.screenshot(path=str(SHOTS / f"{Path(name).stem}_top.png"))
            seen = [_exercise_player(page, players.nth(k), k, name) for k in range(expected)]
            if expected:
                players.first.scroll_into_view_if_needed()
                players.first.screenshot(path=str(SHOTS / f"{Path(name).stem}_player0.png"))
            assert not errors, f"{name}: console errors: {errors[:5]}"
            assert not outside, f"{name}: requests leaving the machine: {outside[:5]}"
            report[name] = {"players": seen}
        finally:
            ctx.close()
    assert sum(len(r["players"]) for r in report.values()) >= len(PAGES), report
    (SHOTS / "report.json").write_text(json.dumps(report, indent=1))


@pytest.mark.timeout(300)
def test_search_math_and_notes(site, browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = ctx.new_page()
    outside: list[str] = []
    page.route(
        "**/*",
        lambda r: (
            r.continue_()
            if r.request.url.startswith(("file://", "data:"))
            else (outside.append(r.request.url), r.abort())
        ),
    )
    try:
        page.goto((site / "index.html").as_uri(), wait_until="load")
        page.fill(".site-search", "preemption")
        _wait(lambda: page.locator(".site-results a").count() > 0, 10, "search results")
        hrefs = [
            page.locator(".site-results a").nth(i).get_attribute("href")
            for i in range(page.locator(".site-results a").count())
        ]
        assert any(h.startswith("06_preemption.html") for h in hrefs), hrefs
        page.fill(".site-search", "zzzqqxnotaword")
        _wait(lambda: page.locator(".site-results a").count() == 0, 10, "no results for a made-up word")
        page.goto((site / "06_preemption.html").as_uri(), wait_until="load")
        _wait(lambda: page.locator(".MathJax_CHTML, mjx-container").count() > 0, 60, "MathJax to typeset lab 06")
        assert page.locator(".site-note-check").count() >= 1
        assert not outside, outside
    finally:
        ctx.close()


SOLUTION = re.compile(r"### BEGIN SOLUTION[^\n]*\n(.*?)### END SOLUTION", re.S)


def test_exercises_show_stubs_never_solutions(site):
    """No line of a solution region is a line of its page (unless the lab itself has it, e.g. in prose);
    every exercise's stub and every check() note is."""
    for i, sol in enumerate(LABS):
        page = (site / PAGES[i]).read_text(encoding="utf-8")
        text = re.sub(r"<[^>]+>", "", page)
        import html as _html

        text = _html.unescape(text)
        page_lines = {ln.strip() for ln in text.splitlines()}
        nb = nbformat.read(sol, as_version=4)
        n_ex = 0
        for cell in nb.cells:
            for region in SOLUTION.findall(cell.source) if cell.cell_type == "code" else []:
                n_ex += 1
                lines = [ln.strip() for ln in region.splitlines() if len(ln.strip()) > 25]
                leaked = [ln for ln in lines if ln in page_lines and ln not in _stub_lines(sol)]
                assert not leaked, f"{PAGES[i]}: solution lines on the site: {leaked[:3]}"
        stubs = text.count("replace this line with your code")
        assert stubs >= n_ex, f"{PAGES[i]}: {stubs} stubs shown for {n_ex} solution regions"
        checks = sum(1 for c in nb.cells if c.cell_type == "code" and re.match(r"\s*check\(", c.source))
        assert page.count('data-site-note="check"') == checks, PAGES[i]


def _stub_lines(sol: Path) -> set[str]:
    lab = nbformat.read(REPO / "labs" / sol.name, as_version=4)
    return {ln.strip() for c in lab.cells for ln in c.source.splitlines()}


#: Per distinct Chinese character of the selected elements: drawn in the first one's font on a canvas, a hash of the
#: pixels. A character no font has is drawn as the one missing-glyph box: it hashes like U+E000 (a private-use
#: code point no font draws) and like every other missing character.
JS_GLYPHS = """(sel) => {
  const els = [...document.querySelectorAll(sel)];
  const st = getComputedStyle(els[0]);
  const chars = [...new Set([...els.map(e => e.textContent).join('')].filter(c => /[\\u4e00-\\u9fff]/.test(c)))].slice(0, 300);
  const c = document.createElement('canvas'); c.width = 48; c.height = 48;
  const g = c.getContext('2d', {willReadFrequently: true});
  const draw = ch => {
    g.clearRect(0, 0, 48, 48); g.font = '32px ' + st.fontFamily; g.fillText(ch, 4, 38);
    let h = 0; const d = g.getImageData(0, 0, 48, 48).data;
    for (let i = 3; i < d.length; i += 4) h = (Math.imul(h, 31) + d[i]) | 0;
    return h;
  };
  const box = draw('\\ue000');
  const hashes = chars.map(draw);
  return {chars: chars.length, distinct: new Set(hashes).size, boxes: chars.filter((ch, i) => hashes[i] === box).slice(0, 20),
          font: st.fontFamily};
}"""


@pytest.mark.timeout(900)
def test_chinese_pages_render_play_and_link_to_english(zh_site, site, browser):
    """The Chinese edition's pages offline: the zh interface and prose, every player playing, no missing glyphs,
    and the language link to the same English page (which the English build has)."""
    built = json.loads((zh_site / "build.json").read_text(encoding="utf-8"))
    assert built["lang"] == "zh" and built["pages"], built
    for name in built["pages"]:
        html = (zh_site / name).read_text(encoding="utf-8")
        expected = _players_in_state(html)
        ctx = browser.new_context(viewport={"width": 1280, "height": 1000}, locale="zh-CN")
        page = ctx.new_page()
        outside: list[str] = []
        errors: list[str] = []
        page.route(
            "**/*",
            lambda r, outside=outside: (
                r.continue_()
                if r.request.url.startswith(("file://", "data:", "blob:"))
                else (outside.append(r.request.url), r.abort())
            ),
        )
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        try:
            page.goto((zh_site / name).as_uri(), wait_until="load", timeout=60_000)
            assert page.evaluate("document.documentElement.lang") == "zh", name
            assert "实验" in page.inner_text(".site-nav"), f"{name}: the sidebar is not the Chinese one"
            cells = page.locator(".jp-MarkdownCell").all_inner_texts()
            chinese = [t for t in cells if re.search(r"[\u4e00-\u9fff]", t)]
            assert len(chinese) >= len(cells) - 1 >= 1, (
                f"{name}: {len(chinese)} of {len(cells)} markdown cells in Chinese"
            )
            glyphs = page.evaluate(JS_GLYPHS, ".jp-MarkdownCell .jp-RenderedMarkdown")
            assert glyphs["chars"] >= 50 and not glyphs["boxes"] and glyphs["distinct"] == glyphs["chars"], (
                f"{name}: Chinese characters drawn as missing-glyph boxes (font {glyphs['font']}): {glyphs}"
            )
            players = page.locator(".pl-player")
            _wait(
                lambda: players.count() >= expected and page.locator(".pl-player .pl-frame svg").count() >= expected,
                60,
                f"zh {name}: {expected} players to render",
            )
            assert expected >= 1 and players.count() == expected, f"zh {name}: {players.count()} of {expected} players"
            for k in range(expected):
                _exercise_player(page, players.nth(k), k, f"zh {name}")
            page.screenshot(path=str(SHOTS / f"zh_{Path(name).stem}_top.png"))
            assert not errors, f"zh {name}: console errors: {errors[:5]}"
            assert not outside, f"zh {name}: requests leaving the machine: {outside[:5]}"
            link = page.locator(".site-langs a[hreflang='en']")
            assert link.count() == 1 and link.inner_text() == "English", f"zh {name}: no link to the English page"
            link.click()
            page.wait_for_load_state("load")
            assert page.url == (site / name).as_uri(), f"zh {name}: the English link opened {page.url}"
            assert page.evaluate("document.documentElement.lang") == "en"
            assert page.locator(".site-langs a[hreflang='zh']").get_attribute("href") == f"../zh/{name}"
        finally:
            ctx.close()
