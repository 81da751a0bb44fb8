"""website/build.py without a browser or a kernel: what each cell of a page shows, the cloud links."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

from pagedlab import routes

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("site_build", ROOT / "website" / "build.py")
assert _spec is not None and _spec.loader is not None
build = importlib.util.module_from_spec(_spec)
sys.modules["site_build"] = build
_spec.loader.exec_module(build)
S = build.strings("en")


def _code(cid: str, source: str, outputs=()):
    c = nbformat.v4.new_code_cell(source, id=cid)
    c.outputs = list(outputs)
    c.execution_count = 1
    return c


def _out(text: str):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def test_compose_shows_stubs_notes_and_real_outputs():
    solution = "def f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION\n"
    stub = 'def f():\n    raise NotImplementedError("exercise x: replace this line with your code")\n'
    executed = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Lab", id="t"),
            _code("ex", solution, [_out("solution output")]),
            _code("chk", "check(f)", [_out("all 6 tests passed")]),
            _code("pred", 'p = predict("how many?", ["1", "2"])', [_out("widget")]),
            _code("plot", "print(f())", [_out("42")]),
        ]
    )
    executed.metadata["widgets"] = {"state": "kept"}
    lab = nbformat.v4.new_notebook(cells=[executed.cells[0].copy()] + [c.copy() for c in executed.cells[1:]])
    lab.cells[1] = _code("ex", stub)
    page, counts = build.compose(executed, lab, S)
    ex, chk, pred, plot = page.cells[1:]
    assert ex.source == stub and "return 42" not in str(page)
    assert [o["data"]["text/plain"] for o in ex.outputs] == [S["exercise_note"]]
    assert [o["data"]["text/plain"] for o in chk.outputs] == [S["check_note"]], "a pass the reader never earned"
    assert "all 6 tests passed" not in str(chk.outputs)
    assert pred.outputs[0]["data"]["text/plain"] == S["widget_note"] and pred.outputs[1]["text"] == "widget"
    assert plot.outputs == executed.cells[4].outputs and plot.source == "print(f())"
    assert page.metadata["widgets"] == {"state": "kept"}
    assert counts == {"exercises": 1, "checks": 1, "kernel_widgets": 1}


def test_compose_refuses_a_lab_cell_the_solution_lacks():
    executed = nbformat.v4.new_notebook(cells=[_code("a", "x = 1")])
    lab = nbformat.v4.new_notebook(cells=[_code("b", "x = 1")])
    with pytest.raises(build.SiteBuildError, match="no cell with that id"):
        build.compose(executed, lab, S)


def test_site_links_follow_the_repository_setting(monkeypatch):
    url = "https://github.com/example-owner/pagedlab"
    monkeypatch.setattr(routes, "repository_url", lambda: url)
    html = build.routes_html("03_copy_on_write", S)
    assert routes.colab_url("labs/03_copy_on_write.ipynb", url).replace("&", "&amp;") in html
    assert routes.binder_url("labs/03_copy_on_write.ipynb", url).replace("&", "&amp;") in html
    monkeypatch.setattr(routes, "repository_url", lambda: None)
    assert S["routes_unset"] in build.routes_html("03_copy_on_write", S).replace("&#x27;", "'")


def test_unknown_language_is_named():
    with pytest.raises(build.SiteBuildError, match="no interface strings for language 'xx'"):
        build.strings("xx")


def test_every_interface_string_has_a_chinese_one():
    import json
    import re

    table = json.loads((ROOT / "website" / "strings.json").read_text(encoding="utf-8"))
    assert set(table["zh"]) == set(table["en"]), "a key English has and Chinese lacks (or the other way)"
    zh = build.strings("zh")
    for key, english in table["en"].items():
        assert zh[key] != english and re.search(r"[\u4e00-\u9fff]", zh[key]), f"zh {key!r} is not Chinese: {zh[key]!r}"
        assert set(re.findall(r"check\(\)|Colab|Binder|Jupyter|\[project\.urls\]", english)) <= set(
            re.findall(r"check\(\)|Colab|Binder|Jupyter|\[project\.urls\]", zh[key])
        ), f"zh {key!r} drops a name the English keeps"


def test_the_chinese_edition_runs_translated_solutions_and_shows_the_chinese_labs(tmp_path, monkeypatch):
    """`make site SITE_LANG=zh`: the zh strings in the page, the solutions translated by their catalogs
    (markdown in Chinese, the language cell that makes check() and the pictures speak Chinese) matched by
    cell id to labs/zh/, whose Colab links open labs/zh/. Nothing is executed."""
    zh = build.strings("zh")
    solutions, labs = build.edition("zh", ROOT / "solutions", None, tmp_path / "sol")
    assert labs == ROOT / "labs" / "zh" and solutions == tmp_path / "sol"
    todo = build.pairs(solutions, labs)
    assert [s.name for s, _ in todo] == sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    sol, lab = next((s, la) for s, la in todo if s.stem == "03_copy_on_write")
    executed = nbformat.read(sol, as_version=4)  # as if executed: same cells and ids
    page, counts = build.compose(executed, nbformat.read(lab, as_version=4), zh)
    assert counts["checks"] > 0 and counts["exercises"] > 0
    assert any(c.cell_type == "code" and 'set_language("zh")' in c.source for c in executed.cells)
    assert any(c.cell_type == "markdown" and "写时复制" in c.source for c in page.cells)
    notes = [o["data"]["text/plain"] for c in page.cells for o in c.get("outputs", []) if "data" in o]
    assert zh["check_note"] in notes and zh["exercise_note"] in notes
    side, _ = build.nav_html([{"href": "index.html", "title": "t"}], 0, zh)
    assert zh["search"] in side and zh["site_title"] in side
    url = "https://github.com/example-owner/pagedlab"
    monkeypatch.setattr(routes, "repository_url", lambda: url)
    html = build.routes_html("03_copy_on_write", zh, "zh")
    assert routes.colab_url("labs/zh/03_copy_on_write.ipynb", url).replace("&", "&amp;") in html
    assert zh["open_colab"] in html
    assert build.edition("en", ROOT / "solutions", None, tmp_path / "x") == (ROOT / "solutions", ROOT / "labs")
    with pytest.raises(build.SiteBuildError, match="no zh catalogs"):
        build.edition("zh", tmp_path, None, tmp_path / "y")


def test_only_refuses_a_lab_that_does_not_exist(tmp_path):
    """`--only` names labs by stem; a stem that is no lab stops the build before anything runs, naming it."""
    with pytest.raises(build.SiteBuildError, match=r"--only names no lab \['02_block_pol'\]"):
        build.build("en", ROOT / "solutions", None, tmp_path / "en", 1, 60, True, ["00_welcome", "02_block_pol"])
    assert not (tmp_path / "en").exists()


def test_every_page_links_to_itself_in_the_other_languages():
    """The language links: the same page in each other edition of website/strings.json, under its own name."""
    zh = build.languages_html("02_block_pool.html", "zh")
    assert zh == '<div class="site-langs"><a href="../en/02_block_pool.html" hreflang="en" lang="en">English</a></div>'
    en = build.languages_html("index.html", "en")
    assert 'href="../zh/index.html" hreflang="zh"' in en and ">中文</a>" in en and "../en/" not in en


def test_a_page_says_its_language():
    """`<html lang>` is the edition's (nbconvert's exporter setting; a "language_code" resource alone is ignored)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 实验")])
    assert '<html lang="zh">' in build.render(nb, "zh")
    assert '<html lang="en">' in build.render(nb, "en")
