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
