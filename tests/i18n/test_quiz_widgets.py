"""The prediction and self-check widgets in Chinese: their fixed words, and every question, choice, explanation and
measurement the labs 03-09 hand to ``predict`` / ``reveal`` (read from the solution notebooks' code), go through
the message catalog (pagedlab/i18n/zh.po); the answers are still read by index, so the English stays the key."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from pagedlab.i18n import messages
from tests.i18n.source_strings import template

REPO = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def _english_after():
    yield
    messages.set_language(None)


def prediction_texts(notebook: Path) -> list[str]:
    """The texts ``notebook``'s code cells give ``predict(...)`` and ``.reveal(...)``, and the choices they list
    (upper-case names assigned a list, or a dict whose keys are the choices, in a cell that calls predict)."""
    out: list[str] = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or not re.search(r"\bpredict\(|\.reveal\(", src):
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in ("predict", "reveal"):
                    out += [t for a in [*node.args, *(k.value for k in node.keywords)] if (t := template(a))]
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
                elts = node.value.elts if isinstance(node.value, ast.List) else getattr(node.value, "keys", [])
                out += [t for e in elts if e is not None and (t := template(e))]
    return [t for t in out if not re.fullmatch(r"[\d.]+", t)]  # a number as a choice stays a number


NOTEBOOKS = sorted((REPO / "solutions").glob("0[3-9]_*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_prediction_text_of_the_lab_has_a_chinese_entry(notebook):
    texts = prediction_texts(notebook)
    cat = messages.catalog("zh")
    missing = [t for t in texts if cat.lookup(t) is None]
    assert not missing, f"{notebook.name}: predict()/reveal() texts without an entry in pagedlab/i18n/zh.po: {missing}"


def test_the_labs_ask_for_predictions():
    """A guard for the test above: the extraction finds the questions, choices, explanations and measurements."""
    texts = [t for nb in NOTEBOOKS for t in prediction_texts(nb)]
    assert len(texts) > 60
    assert "parallel sampling (n=4)" in texts and "Measured: {a}x." in texts
    assert any(t.startswith("Four samples share the prompt's blocks") for t in texts)


def test_a_prediction_and_a_self_check_speak_chinese_and_keep_the_english_key():
    from pagedlab.viz.quiz import Question, predict, self_check

    messages.set_language("zh")
    p = predict(
        "On the long prompt, which saves more memory by sharing: 4 parallel samples or 4 beams?",
        ["parallel sampling (n=4)", "beam search (width 4)", "about the same"],
    )
    assert "并行采样（n=4）" in p.input.options and p.lock_button.description == "锁定我的预测"
    assert "节省的显存" in p.children[0].value and "先预测并锁定答案" in p.feedback.value
    p.input.index = 1
    p.lock()
    assert "已记录预测：束搜索（宽度 4）。" in p.feedback.value
    p.reveal(
        "parallel sampling (n=4)",
        explain="beams also share the tokens they generate together, until they part.",
        measured="Measured: 21.3% (n=4) vs 35.0% (width 4).",
    )
    html = p.result.value
    assert "不太对：你选了 束搜索（宽度 4）；答案是 并行采样（n=4）。" in html
    assert "束在分开之前还共享它们一起生成的 token。" in html and "测得：21.3%（n=4）对 35.0%（宽度 4）。" in html
    assert not re.search(r"[A-Za-z]{4,} [A-Za-z]{3,}", re.sub(r"<[^>]*>", "", html)), html
    assert p.verdict().text.startswith("Not quite: you chose beam search (width 4)")  # the verdict stays English
    n = predict(
        "With long_prefill_token_threshold=48, over how many steps is the long prompt prefilled?",
        unit="steps",
        rel_tol=0.2,
    )
    n.input.value = "6"
    n.lock()
    n.reveal(3, explain="ceil(130 / 48) = 3 chunks of at most 48 tokens.")
    assert "你预测的是 6 步；测得 3 步（高了 2.0 倍）。 ceil(130 / 48) = 3 块，每块至多 48 个 token。" in n.result.value
    s = self_check([Question("q?", ("identical", "visibly different"), 0, "e")])
    s.answer(0, 0)
    assert s.inputs[0].options == ("完全相同", "明显不同") and "1 题中答对 1 题（已答 1 题）" in s.score.value
    assert "<b>自测</b>" in s.children[0].value
