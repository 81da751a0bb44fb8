"""Build the static course site: one HTML page per lab, with its executed outputs (``make site``).

    python website/build.py [--lang en] [--solutions solutions] [--labs labs] [--out build/site/en] [--jobs 2]
                            [--only 00_welcome,02_block_pool]

What a page holds, and where it comes from:

* every cell's **source comes from labs/** (what the learner gets: exercise cells are the stubs with their
  docstrings, never the solution), matched to solutions/ by cell id (labs/ is generated from solutions/);
* **outputs come from executing solutions/** with nbclient (``store_widget_state=True``), so figures,
  tables and players are the real ones; an exercise cell's own outputs are dropped;
* a ``check(...)`` cell shows no outputs (they would claim a pass the reader never earned) but a note:
  run this in Jupyter to check your code; predictions and self-checks keep their widgets (the questions
  read fine) under a note that answering needs a running kernel;
* pages are rendered by ``jupyter nbconvert``'s lab template (HTMLExporter) with every script served from
  the site: the widget renderer (npm ``@jupyter-widgets/html-manager``), ``requirejs`` and MathJax 2
  (``website/package-lock.json``), copied into ``_static/``; no CDN at build or view time;
* a sidebar lists the labs (the welcome lab is ``index.html``), each page has Previous/Next links, a link to
  the same page in each other language (``../<lang>/<page>``: the editions are built side by side under
  ``build/site/``), and a search box searches every page's text (``search_index.js``, built here;
  ``website/static/site.js``).

Languages: ``--lang`` picks the interface strings (``website/strings.json``: every English key has a
string in each language) and the ``<html lang>``. A translated edition (``make site SITE_LANG=zh``) reads
``labs/<lang>/`` (``pagedlab labs build`` writes it) and executes the solution notebooks translated the
same way (``solutions/<lang>/*.po``, :func:`pagedlab.i18n.notebooks.translate_notebook`; written to
``<out>/../_solutions/<lang>/``, run in ``solutions/``), so check(), pictures and self-checks print in
that language; it writes to ``build/site/<lang>`` and its Colab/Binder links open ``labs/<lang>/``.

``--only STEM,STEM`` builds those labs' pages alone (named as in the whole site; the sidebar lists only them):
``make test`` builds the Chinese edition of two labs that way for its browser test.

Executed notebooks are cached in ``<out>/../_executed/<lang>/`` keyed by the solution notebook, the lab
notebook and every file of the ``pagedlab`` package (any change re-executes); ``--no-cache`` re-executes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import hashlib
import html
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NODE = HERE / "node_modules"
STATIC = "_static"

#: ``check(...)`` as a statement of its own: the cell runs the learner's tests.
CHECK_CALL = re.compile(r"^\s*check\(", re.M)
#: cells whose widgets answer the reader through the kernel (predictions, self-checks)
KERNEL_WIDGETS = re.compile(r"\b(predict|self_check|lab_self_check)\(")
#: The widget renderer: its bundle loads its fonts from ``@jupyter-widgets/html-manager/dist/`` and
#: ``@jupyter-widgets/`` beside the page (the layout of the CDN it was built for), so that is where they go.
WIDGETS = "@jupyter-widgets/html-manager/dist"
WIDGET_FILES = ("embed-amd.js", "*.woff2", "*.woff", "*.ttf")
#: files copied from node_modules into _static/ (source -> destination), MathJax trimmed to what TeX-AMS_CHTML uses
NODE_FILES = {
    "requirejs/require.js": "require.js",
    "mathjax/MathJax.js": "mathjax/MathJax.js",
    "mathjax/config/TeX-AMS_CHTML-full.js": "mathjax/config/TeX-AMS_CHTML-full.js",
    "mathjax/config/Safe.js": "mathjax/config/Safe.js",
    "mathjax/extensions": "mathjax/extensions",
    "mathjax/jax/input/TeX": "mathjax/jax/input/TeX",
    "mathjax/jax/output/CommonHTML": "mathjax/jax/output/CommonHTML",
    "mathjax/jax/element": "mathjax/jax/element",
    "mathjax/fonts/HTML-CSS/TeX/woff": "mathjax/fonts/HTML-CSS/TeX/woff",
    "mathjax/localization/en": "mathjax/localization/en",
}


class SiteBuildError(RuntimeError):
    """The site could not be built (a missing input, a notebook that failed to run)."""


# ------------------------------------------------------------------------------------------ inputs
def strings(lang: str) -> dict[str, str]:
    table = json.loads((HERE / "strings.json").read_text(encoding="utf-8"))
    if lang not in table:
        raise SiteBuildError(
            f"no interface strings for language {lang!r} in website/strings.json (have: {sorted(table)})"
        )
    return {**table["en"], **table[lang]}


def edition(lang: str, solutions: Path, labs: Path | None, work: Path) -> tuple[Path, Path]:
    """The solution notebooks to execute and the labs to show for ``lang``: English as given; another
    language the solutions translated by their catalogs (``solutions/<lang>/*.po``, written to ``work``)
    and ``labs/<lang>/`` (``labs`` when given)."""
    if lang == "en":
        return solutions, labs or ROOT / "labs"
    sys.path.insert(0, str(ROOT))
    from pagedlab.i18n import notebooks

    catalogs = solutions / lang
    if not any(catalogs.glob("*.po")):
        raise SiteBuildError(f"no {lang} catalogs in {catalogs} (pagedlab translate update --lang {lang})")
    work.mkdir(parents=True, exist_ok=True)
    for sol in sorted(solutions.glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(sol.read_text(encoding="utf-8"))
        translated, _ = notebooks.translate_notebook(nb, notebooks.read(catalogs / f"{sol.stem}.po"), lang)
        target = work / sol.name
        text = json.dumps(translated, ensure_ascii=False, indent=1) + "\n"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return work, labs or ROOT / "labs" / lang


def pairs(solutions: Path, labs: Path) -> list[tuple[Path, Path]]:
    sols = sorted(solutions.glob("[0-9][0-9]_*.ipynb"))
    if not sols:
        raise SiteBuildError(f"no lab notebooks (NN_name.ipynb) in {solutions}")
    missing = [s.name for s in sols if not (labs / s.name).exists()]
    if missing:
        raise SiteBuildError(f"{labs} lacks {missing}: run `pagedlab labs build` first")
    return [(s, labs / s.name) for s in sols]


def kit_fingerprint() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "pagedlab").rglob("*.py")) + sorted((ROOT / "kernels").rglob("*.py")):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------ execute
def execute(solution: Path, cache: Path, key: str, timeout: int, cwd: Path | None = None) -> tuple[Any, float, bool]:
    """The executed solution notebook (from the cache when ``key`` matches), seconds spent, cache hit.
    ``cwd``: the folder it runs in (default: its own)."""
    from nbclient import NotebookClient

    cached = cache / solution.name
    stamp = cache / (solution.name + ".key")
    if cached.exists() and stamp.exists() and stamp.read_text() == key:
        return nbformat.read(cached, as_version=4), 0.0, True
    nb = nbformat.read(solution, as_version=4)
    t0 = time.perf_counter()
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd or solution.parent)}},
        store_widget_state=True,
    )
    try:
        client.execute()
    except Exception as e:  # CellExecutionError and kernel deaths: name the notebook
        raise SiteBuildError(f"{solution} failed to run: {e}") from e
    cache.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, cached)
    stamp.write_text(key)
    return nb, time.perf_counter() - t0, False


# ------------------------------------------------------------------------------------------ compose
def _note(text: str, kind: str) -> dict[str, Any]:
    body = f'<div class="site-note site-note-{kind}" data-site-note="{kind}">{html.escape(text)}</div>'
    return nbformat.v4.new_output("display_data", data={"text/html": body, "text/plain": text})


def compose(executed: Any, lab: Any, s: dict[str, str]) -> tuple[Any, dict[str, int]]:
    """The page's notebook: lab sources, the solution's outputs, notes where a kernel is needed.

    Returns the notebook and counts (``exercises``, ``checks``, ``kernel_widgets``).
    """
    by_id = {c.get("id"): c for c in executed.cells}
    out = copy.deepcopy(lab)
    out.metadata = copy.deepcopy(executed.metadata)
    counts = {"exercises": 0, "checks": 0, "kernel_widgets": 0}
    for cell in out.cells:
        ran = by_id.get(cell.get("id"))
        if cell.cell_type != "code":
            continue
        if ran is None:
            raise SiteBuildError(f"lab cell {cell.get('id')!r} has no cell with that id in the solution notebook")
        if ran.source != cell.source:  # an exercise: the stub is shown, the solution's outputs are not
            counts["exercises"] += 1
            cell.outputs = [_note(s["exercise_note"], "exercise")]
            cell.execution_count = None
            continue
        cell.execution_count = ran.get("execution_count")
        if CHECK_CALL.search(cell.source) and "lab_self_check" not in cell.source:
            counts["checks"] += 1
            cell.outputs = [_note(s["check_note"], "check")]
        elif KERNEL_WIDGETS.search(cell.source):
            counts["kernel_widgets"] += 1
            cell.outputs = [_note(s["widget_note"], "widget"), *ran.outputs]
        else:
            cell.outputs = ran.outputs
    return out, counts


# ------------------------------------------------------------------------------------------ render
def title_of(nb: Any, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m:
                return re.sub(r"[*_`]", "", m.group(1)).strip()
    return fallback


def page_name(i: int, solution: Path) -> str:
    return "index.html" if i == 0 else solution.stem + ".html"


def render(nb: Any, lang: str) -> str:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        extra_template_paths=[str(HERE / "templates")],
        require_js_url=f"{STATIC}/require.js",
        mathjax_url=f"{STATIC}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        widget_renderer_url=f"{WIDGETS}/embed-amd.js",
        jquery_url="",
        language_code=lang,  # the exporter's own setting: it overrides a "language_code" passed in resources
    )
    exporter.template_file = "course.html.j2"
    body, _ = exporter.from_notebook_node(nb)
    return body


def languages_html(href: str, lang: str) -> str:
    """Links to page ``href`` in every other language of ``website/strings.json`` (``../<lang>/<href>``)."""
    table = json.loads((HERE / "strings.json").read_text(encoding="utf-8"))
    links = [
        f'<a href="../{other}/{href}" hreflang="{other}" lang="{other}">{html.escape(table[other]["language_name"])}</a>'
        for other in table
        if other != lang
    ]
    return f'<div class="site-langs">{" · ".join(links)}</div>'


def nav_html(pages: list[dict[str, str]], current: int, s: dict[str, str]) -> tuple[str, str]:
    items = "".join(
        f'<li{" class=current" if i == current else ""}><a href="{p["href"]}">{html.escape(p["title"])}</a></li>'
        for i, p in enumerate(pages)
    )
    side = (
        f'<nav class="site-nav" aria-label="{html.escape(s["labs"])}">'
        f'<a class="site-home" href="index.html">{html.escape(s["site_title"])}</a>'
        f'<input class="site-search" type="search" placeholder="{html.escape(s["search"])}" '
        f'aria-label="{html.escape(s["search"])}" data-none="{html.escape(s["no_results"])}">'
        '<ol class="site-results"></ol>'
        f"<ol class=site-labs>{items}</ol></nav>"
    )
    links = []
    if current > 0:
        links.append(
            f'<a class="site-prev" href="{pages[current - 1]["href"]}">← {html.escape(pages[current - 1]["title"])}</a>'
        )
    if current + 1 < len(pages):
        links.append(
            f'<a class="site-next" href="{pages[current + 1]["href"]}">{html.escape(pages[current + 1]["title"])} →</a>'
        )
    return side, f'<div class="site-pager">{"".join(links)}</div>'


def routes_html(stem: str, s: dict[str, str], lang: str = "en") -> str:
    """ "Open in Colab" / Binder links for lab ``stem`` (pagedlab.routes, from pyproject's repository URL)."""
    sys.path.insert(0, str(ROOT))
    from pagedlab import routes

    url = routes.repository_url()
    if url is None:
        return f'<div class="site-routes site-routes-unset">{html.escape(s["routes_unset"])}</div>'
    lab = f"labs/{stem}.ipynb" if lang == "en" else f"labs/{lang}/{stem}.ipynb"
    colab = routes.colab_url(lab, url)
    binder = routes.binder_url(lab, url)
    return (
        f'<div class="site-routes"><a href="{html.escape(colab)}">{html.escape(s["open_colab"])}</a> · '
        f'<a href="{html.escape(binder)}">{html.escape(s["open_binder"])}</a> · '
        f'<a href="{html.escape(url)}">{html.escape(s["repository"])}</a></div>'
    )


def page_text(nb: Any) -> str:
    parts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    text = re.sub(r"<[^>]+>|[#*`_>\[\]()|]", " ", "\n".join(parts))
    return re.sub(r"\s+", " ", text).strip()


def copy_static(out: Path) -> None:
    if not NODE.exists():
        raise SiteBuildError(f"{NODE} is missing: run `npm ci` in website/ (make site does)")
    dest = out / STATIC
    if dest.exists():
        shutil.rmtree(dest)
    for src, dst in NODE_FILES.items():
        s, d = NODE / src, dest / dst
        if not s.exists():
            raise SiteBuildError(f"{s} is missing: run `npm ci` in website/")
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d, ignore=shutil.ignore_patterns("*.map", "embed.js", "*.LICENSE.txt"))
        else:
            shutil.copy2(s, d)
    for f in (HERE / "static").iterdir():
        shutil.copy2(f, dest / f.name)
    copy_widget_renderer(out)


def copy_widget_renderer(out: Path) -> None:
    """The html-manager bundle and its fonts, where the bundle looks for them (``WIDGETS``)."""
    widgets = out / WIDGETS
    if (out / "@jupyter-widgets").exists():
        shutil.rmtree(out / "@jupyter-widgets")
    widgets.mkdir(parents=True)
    for pattern in WIDGET_FILES:
        found = sorted((NODE / WIDGETS).glob(pattern))
        if not found:
            raise SiteBuildError(f"{NODE / WIDGETS} has no {pattern}: run `npm ci` in website/")
        for f in found:
            shutil.copy2(f, widgets / f.name)
            if pattern != "embed-amd.js":
                shutil.copy2(f, out / "@jupyter-widgets" / f.name)


# ------------------------------------------------------------------------------------------ main
def build(
    lang: str,
    solutions: Path,
    labs: Path | None,
    out: Path,
    jobs: int,
    timeout: int,
    use_cache: bool,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Build the ``lang`` edition into ``out`` (``labs`` None: ``labs/`` or ``labs/<lang>/``, :func:`edition`);
    ``only``: the stems of the labs to build (default: all)."""
    t0 = time.perf_counter()
    s = strings(lang)
    cwd = solutions
    solutions, labs = edition(lang, solutions, labs, out.parent / "_solutions" / lang)
    every = pairs(solutions, labs)
    names = {sol.stem: page_name(i, sol) for i, (sol, _) in enumerate(every)}
    unknown = sorted(set(only or ()) - set(names))
    if unknown:
        raise SiteBuildError(f"--only names no lab {unknown} (the labs: {sorted(names)})")
    todo = [(sol, lab) for sol, lab in every if only is None or sol.stem in only]
    fp = kit_fingerprint()
    cache = out.parent / "_executed" / lang
    if not use_cache and cache.exists():
        shutil.rmtree(cache)
    (out / "build.json").unlink(missing_ok=True)  # written last: its presence says the build finished
    os.environ.pop("MPLBACKEND", None)  # the kernels draw inline figures
    # the kernels import this checkout's pagedlab (not another one an editable install may point at)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    def key(sol: Path, lab: Path) -> str:
        return hashlib.sha256(sol.read_bytes() + lab.read_bytes() + fp.encode()).hexdigest()

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {sol: pool.submit(execute, sol, cache, key(sol, lab), timeout, cwd) for sol, lab in todo}
        executed = {sol: f.result() for sol, f in futures.items()}
    t_exec = time.perf_counter() - t0

    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.html"):
        old.unlink()
    copy_static(out)
    pages_nb = []
    report: dict[str, Any] = {"lang": lang, "pages": {}}
    for sol, lab in todo:
        nb, counts = compose(executed[sol][0], nbformat.read(lab, as_version=4), s)
        pages_nb.append((sol, nb, counts))
    pages = [{"href": names[sol.stem], "title": title_of(nb, sol.stem), "stem": sol.stem} for sol, nb, _ in pages_nb]
    index = []
    for i, (sol, nb, counts) in enumerate(pages_nb):
        side, pager = nav_html(pages, i, s)
        body = render(nb, lang)
        top = languages_html(pages[i]["href"], lang) + routes_html(sol.stem, s, lang)
        body = body.replace("<main>", f'{side}<main class="site-main">{top}', 1)
        body = body.replace("</main>", f"{pager}</main>", 1)
        (out / pages[i]["href"]).write_text(body, encoding="utf-8")
        index.append({"href": pages[i]["href"], "title": pages[i]["title"], "text": page_text(nb)})
        report["pages"][pages[i]["href"]] = {
            **counts,
            "execute_s": round(executed[sol][1], 1),
            "cached": executed[sol][2],
            "bytes": len(body.encode()),
        }
    (out / "search_index.js").write_text(
        "window.SITE_INDEX = " + json.dumps(index, ensure_ascii=False) + ";\n", encoding="utf-8"
    )
    for md in labs.glob("*.md"):  # pages the labs link to (bugs.md)
        shutil.copy2(md, out / md.name)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    report.update(
        execute_s=round(t_exec, 1),
        total_s=round(time.perf_counter() - t0, 1),
        size_bytes=size,
        files=len(list(out.rglob("*"))),
    )
    (out / "build.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lang", default="en")
    ap.add_argument("--solutions", type=Path, default=ROOT / "solutions")
    ap.add_argument("--labs", type=Path, default=None, help="default: labs/, or labs/<lang>/ for a translation")
    ap.add_argument("--out", type=Path, default=None, help="default: build/site/<lang>")
    ap.add_argument("--jobs", type=int, default=2, help="notebooks executed at once")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    ap.add_argument("--no-cache", action="store_true", help="execute every notebook again")
    ap.add_argument("--only", default=None, help="comma-separated lab stems to build (default: every lab)")
    a = ap.parse_args(argv)
    out = a.out or ROOT / "build" / "site" / a.lang
    try:
        only = [x.strip() for x in a.only.split(",") if x.strip()] if a.only is not None else None
        r = build(a.lang, a.solutions, a.labs, out, a.jobs, a.timeout, not a.no_cache, only)
    except SiteBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"site: {len(r['pages'])} pages in {out} ({r['size_bytes'] / 1e6:.1f} MB, {r['files']} files); "
        f"executed in {r['execute_s']} s, built in {r['total_s']} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
