"""The code cells of the Chinese edition (solutions/zh/*.po, pagedlab.i18n.code_text): a translated cell is the
English cell up to its comments and the text it prints - the same Python tokens otherwise, compiling - so the
code a Chinese learner runs is the English code; a stale or unfaithful translation is never used; and a
translated lab still runs."""

from __future__ import annotations

import json
import re
import tokenize
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedlab.i18n import code_text, notebooks

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = sorted(p for p in SOLUTIONS.glob("*.ipynb") if not p.name.startswith((".", "_")))
_CJK = re.compile(r"[\u4e00-\u9fff]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPAN = re.compile(r"``[^`]+``")


def _code_entries() -> list[tuple[str, notebooks.Entry]]:
    out = []
    for solution in NOTEBOOKS:
        nb = json.loads(solution.read_text(encoding="utf-8"))
        code = {c.get("id") for c in nb["cells"] if c["cell_type"] == "code"}
        for cid, e in notebooks.read(notebooks.catalog_path(solution, "zh")).items():
            if cid in code and e.text:
                out.append((f"{solution.stem}:{cid}", e))
    return out


ENTRIES = _code_entries()


def test_every_lab_has_translated_code_cells():
    stems = {where.split(":")[0] for where, _ in ENTRIES}
    assert stems == {p.stem for p in NOTEBOOKS}
    assert len(ENTRIES) >= 110  # 116 when written: every code cell with comments, printed text or docstrings


@pytest.mark.parametrize("entry", [pytest.param(e, id=w) for w, e in ENTRIES])
def test_translated_code_cell_is_the_english_code(entry):
    """Token for token the English cell (comments, printed text and docstrings aside), it compiles, it is
    Chinese, and the numbers and ``code`` spans its comments, printed text and docstrings state are the English
    ones."""
    assert code_text.differences(entry.english, entry.text) == []
    assert code_text.compiles(entry.text) is None
    en, zh = code_text.prose(entry.english), code_text.prose(entry.text)
    assert _CJK.search(zh), "nothing translated"
    assert sorted(_NUMBER.findall(en)) == sorted(_NUMBER.findall(zh)), "a number of the comments or printed text"
    assert sorted(_SPAN.findall(en)) == sorted(_SPAN.findall(zh)), "a ``code`` span of a docstring"


# ----------------------------------------------------------------------------- what may and may not change
EN = """# Setup: one thread
def f(n):
    '''The blocks of ``n``.'''
    return n
### BEGIN SOLUTION
x = {"a": 1}  # the table
### END SOLUTION
print(f"{'GPU blocks':>10s} holds {x['a']:>4d} blocks, " f"of {n!r}")
print("requests:", len(x))
label = "blocks"
"""
ZH = """# 设置：一个线程
def f(n):
    '''``n`` 的块。'''
    return n
### BEGIN SOLUTION
x = {"a": 1}  # 那张表
### END SOLUTION
print(f"{'GPU 块数':>8s} 持有 " f"{n!r} 中的 {x['a']:>4d} 个块")
print("请求数：", len(x))
label = "blocks"
"""


def test_comments_and_printed_text_may_change():
    assert code_text.differences(EN, ZH) == []
    assert code_text.has_text(EN) and not code_text.has_text("x = 1  # noqa: E501\nlabel = 'some words'")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('x = {"a": 1}  # 那张表', 'x = {"b": 1}  # 那张表'),  # a dictionary key
        ('x = {"a": 1}  # 那张表', 'x = {"a": 2}  # 那张表'),  # a number
        ('x = {"a": 1}  # 那张表', 'y = {"a": 1}  # 那张表'),  # a name
        ("{x['a']:>4d}", "{x['b']:>4d}"),  # a field's subscript
        ("{x['a']:>4d}", "{x['a']:>5d}"),  # a field's format spec
        ("{n!r}", "{n}"),  # a field's conversion
        ('label = "blocks"', 'label = "块"'),  # a string print() does not show
        ("### BEGIN SOLUTION", "### 开始 SOLUTION"),  # an exercise marker
        ('print("请求数：", len(x))', 'print("请求数：", len(x), 1)'),  # an extra argument
        ('label = "blocks"', 'label = "blocks"\nlabel = 2'),  # an extra statement
        ("len(x))", "len(x)"),  # does not parse
        ("'''``n`` 的块。'''", "f'''``n`` 的块。'''"),  # a docstring that no longer is one
        ("'''``n`` 的块。'''", "'''``n`` 的块。''', 1"),  # a docstring that becomes a tuple
    ],
)
def test_anything_else_that_changes_is_found(old, new):
    assert old in ZH
    bad = ZH.replace(old, new)
    assert code_text.differences(EN, bad), bad


def test_text_before_a_printed_string_may_be_wider_than_ascii():
    """The syntax tree counts UTF-8 bytes, tokenize characters: a "µs" before a printed text still finds it."""
    en = 'unit = "µs·µs"; print("two blocks", unit)\n'
    assert code_text.differences(en, 'unit = "µs·µs"; print("两个块", unit)\n') == []
    assert code_text.differences(en, 'unit = "微秒"; print("两个块", unit)\n')


def test_a_print_argument_that_is_a_key_or_value_stays():
    en = 'print(d["speed"], "tokens/s", f"{t:.1f} s")\n'
    assert code_text.differences(en, 'print(d["速度"], "tokens/s", f"{t:.1f} s")\n')
    assert code_text.differences(en, 'print(d["speed"], "token/秒", f"{t:.1f} 秒")\n') == []


def _code_tokens(source: str) -> list[tuple[int, int, str]]:
    """(index in the source's lines' text, length, kind) of each token a translation must keep."""
    py_lines = source.splitlines(keepends=True)
    starts = [0]
    for line in py_lines:
        starts.append(starts[-1] + len(line))
    spans = code_text._printed_spans(code_text._python(source))
    out = []
    for t, s, (row, col) in code_text._tokens(source):
        at = starts[row - 1] + col
        printed = any(a <= (row, col) < b for a, b in spans)
        if t in (tokenize.NAME, tokenize.NUMBER) or (t == tokenize.STRING and not printed):
            out.append((at, len(s), tokenize.tok_name[t]))
        elif t == tokenize.COMMENT and code_text.KEPT_COMMENT.match(s):
            out.append((at, len(s), "KEPT_COMMENT"))
    return out


_MUTABLE = [e for _, e in ENTRIES if "%" not in e.english and "!" not in e.english.replace("!=", "")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_changed_name_number_key_or_marker_in_a_real_translation_is_found(data):
    """Generated: a real translated cell, one of its code tokens (name, number, string print() does not show,
    exercise marker) changed as a careless translator might - the check finds it."""
    entry = data.draw(st.sampled_from(_MUTABLE))
    at, n, kind = data.draw(st.sampled_from(_code_tokens(entry.text)))
    old = entry.text[at : at + n]
    if kind == "NUMBER":
        new = str(int(old) + 1) if old.isdigit() else old + "1"
    elif kind == "STRING":
        quote = re.match(r"[A-Za-z]*('''|\"\"\"|'|\")", old)
        assert quote
        new = old[: quote.end()] + "块" + old[quote.end() :]
    elif kind == "KEPT_COMMENT":
        new = old.replace("BEGIN", "开始").replace("END", "结束").replace("EXERCISE", "练习").replace("noqa", "无")
    else:
        new = old + "_zh"
    mutated = entry.text[:at] + new + entry.text[at + n :]
    assert mutated != entry.text
    assert code_text.differences(entry.english, mutated), (old, new)


# ----------------------------------------------------------------------------- stale and unfaithful: English used
def _nb(*cells):
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _code(cid, text):
    return {"cell_type": "code", "id": cid, "metadata": {}, "source": text, "outputs": [], "execution_count": None}


def test_changed_english_code_cell_is_stale_and_runs_in_english(tmp_path):
    sol = tmp_path / "01_x.ipynb"
    sol.write_text(json.dumps(_nb(_code("c", "# one block\nprint('blocks:', 16)"), _code("d", "x = 1"))))
    st_ = notebooks.update(sol, "zh")
    assert (st_.cells, st_.missing) == (1, ["c"])  # "x = 1" has nothing to translate
    path = notebooks.catalog_path(sol, "zh")
    entries = notebooks.read(path)
    entries["c"].text = "# 一个块\nprint('块数：', 16)"
    notebooks.write(path, list(entries.values()), "zh", sol.name)
    assert notebooks.status(sol, "zh").ok
    nb, english = notebooks.translate_notebook(json.loads(sol.read_text()), notebooks.read(path), "zh")
    assert (english, "".join(nb["cells"][1]["source"])) == ([], "# 一个块\nprint('块数：', 16)")
    # the English code changes (16 -> 32): the translation is stale, the English cell runs
    sol.write_text(json.dumps(_nb(_code("c", "# one block\nprint('blocks:', 32)"), _code("d", "x = 1"))))
    assert notebooks.status(sol, "zh").stale == ["c"]
    nb, english = notebooks.translate_notebook(json.loads(sol.read_text()), notebooks.read(path), "zh")
    assert (english, "".join(nb["cells"][1]["source"])) == (["c"], "# one block\nprint('blocks:', 32)")
    # a translation that changes the code is unfaithful: listed, and the English cell runs
    entries = notebooks.read(path)
    entries["c"].english, entries["c"].text = "# one block\nprint('blocks:', 32)", "# 一个块\nprint('块数：', 33)"
    notebooks.write(path, list(entries.values()), "zh", sol.name)
    st_ = notebooks.status(sol, "zh")
    assert (st_.unfaithful, st_.stale, st_.ok) == (["c"], [], False)
    nb, english = notebooks.translate_notebook(json.loads(sol.read_text()), notebooks.read(path), "zh")
    assert (english, "".join(nb["cells"][1]["source"])) == (["c"], "# one block\nprint('blocks:', 32)")


# ----------------------------------------------------------------------------- a translated lab runs
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_translated_lab_01_runs_and_prints_chinese(monkeypatch):
    """Lab 01 (the most translated tables) with its Chinese catalog applied, as labs/zh/ has it, run by nbclient:
    no cell fails, and its printed tables and sentences are Chinese (the English run is nbval's)."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("PAGEDLAB_LAB_VLLM", "off")  # as in the nbval run (solutions/conftest.py)
    solution = SOLUTIONS / "01_kv_cache_fragmentation.ipynb"
    entries = notebooks.read(notebooks.catalog_path(solution, "zh"))
    zh, english = notebooks.translate_notebook(json.loads(solution.read_text(encoding="utf-8")), entries, "zh")
    assert english == []
    nb = nbformat.reads(json.dumps(zh), as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(SOLUTIONS)}}).execute()
    printed = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"
    )
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0]
    for text in ("个请求", "回放用时", "论文"):
        assert text in printed, text
