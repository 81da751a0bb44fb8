"""The learner's language and the message catalog (pagedlab.i18n.messages) at the three surfaces that use it:
check()'s report, the pictures' text, the self-checks."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pagedlab.i18n import messages
from pagedlab.i18n.messages import Catalog, I18nError

REPO = Path(__file__).resolve().parents[2]
PO_HEAD = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'


def _po(*entries: tuple[str | None, str, str]) -> str:
    out = [PO_HEAD]
    for ctx, mid, ms in entries:
        out.append((f'msgctxt "{ctx}"\n' if ctx else "") + f'msgid "{mid}"\nmsgstr "{ms}"\n\n')
    return "".join(out)


@pytest.fixture(autouse=True)
def _english_after():
    yield
    messages.set_language(None)


value = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda s: s.strip() == s and "\n" not in s
)


@given(k=st.integers(0, 10**6), n=st.integers(0, 10**6), what=value)
def test_templates_carry_every_value_and_look_values_up(k, n, what):
    cat = Catalog.from_po(
        _po(
            (None, "{what}: {k} of {n} passed", "{what}：{n} 个中通过 {k} 个"),
            (None, "summary", "摘要"),
            ("frame", "All {n} tests passed.", "全部 {n} 个测试通过。"),
        ),
        "t",
    )
    assert cat.lookup(f"{what}: {k} of {n} passed") == f"{'摘要' if what == 'summary' else what}：{n} 个中通过 {k} 个"
    assert cat.lookup(f"x {k} of {n} passed") is None  # the literal text must match
    assert cat.frame(f"<div>All {n} tests passed. 🎉</div>") == f"<div>全部 {n} 个测试通过。 🎉</div>"


def test_context_entries_win_and_lines_keep_their_marks():
    cat = Catalog.from_po(
        _po((None, "no", "否"), ("self-check 04", "no", "不会"), (None, "hint: {h}", "提示：{h}")), "t"
    )
    assert cat.lookup("no") == "否" and cat.lookup("no", "self-check 04") == "不会" and cat.lookup("no", "x") == "否"
    messages.set_language("zh")
    assert messages.tr_lines("  ✅ hint: no\nplain") == "  ✅ 提示：no\nplain"  # the shipped catalog


def test_placeholder_mismatch_and_unknown_languages_are_errors(monkeypatch):
    with pytest.raises(I18nError, match=r"placeholders \['m'\], the English \['n'\]"):
        Catalog.from_po(_po((None, "{n} tests", "{m} 个测试")), "t")
    with pytest.raises(I18nError, match="unknown language 'fr'"):
        messages.set_language("fr")
    monkeypatch.setenv("PAGEDLAB_LANG", "klingon")
    with pytest.raises(I18nError, match="PAGEDLAB_LANG: unknown language 'klingon'"):
        messages.get_language()
    monkeypatch.setenv("PAGEDLAB_LANG", "zh_CN.UTF-8")
    assert messages.get_language() == "zh"
    assert messages.set_language("en") == "en"  # a call beats the environment
    monkeypatch.delenv("PAGEDLAB_LANG")
    assert messages.set_language(None) == "en"


def test_shipped_catalog_loads_and_every_entry_is_translated():
    text = (REPO / "pagedlab" / "i18n" / "zh.po").read_text(encoding="utf-8")
    import io

    from babel.messages.pofile import read_po

    msgs = [m for m in read_po(io.StringIO(text)) if m.id]
    assert not [m.id for m in msgs if not m.string or m.fuzzy], "empty or fuzzy entries in pagedlab/i18n/zh.po"
    assert messages.catalog("zh").lookup("hint: x") == "提示：x"


def test_every_self_check_text_is_translated_and_no_entry_is_left_over():
    data = tomllib.loads((REPO / "pagedlab" / "analysis" / "self_checks.toml").read_text(encoding="utf-8"))
    cat = messages.catalog("zh")
    wanted = {
        (f"self-check {lab}", t)
        for lab, qs in data.items()
        for q in qs
        for t in (q["prompt"], *q["choices"], q["explain"])
    }
    missing = sorted(t for ctx, t in wanted if cat.lookup(t, ctx) is None)
    assert not missing, f"self-check texts without a Chinese translation: {missing[:5]}"
    left_over = sorted(k for k in cat.in_context if k[0].startswith("self-check") and k not in wanted)
    assert not left_over, f"translations of self-check texts that no longer exist (stale): {left_over[:5]}"


def test_self_check_widget_is_chinese_with_the_same_answers():
    from pagedlab.analysis import self_checks

    messages.set_language("zh")
    zh = self_checks.lab_self_check("05")
    messages.set_language("en")
    en = self_checks.lab_self_check("05")
    assert "点击一个答案" in zh.children[0].value and "click an answer" in en.children[0].value
    assert [q.answer for q in zh.questions] == [q.answer for q in en.questions]
    assert zh.questions[0].prompt != en.questions[0].prompt and "预填充" in " ".join(q.prompt for q in zh.questions)


def test_every_exercise_summary_and_test_title_is_translated():
    from pagedlab.grading import registry

    cat = messages.catalog("zh")
    texts = {ex.summary for ex in registry.all_exercises()} | {
        t.title for ex in registry.all_exercises() for t in ex.tests
    }
    missing = sorted(t for t in texts if cat.lookup(t) is None)
    assert not missing, f"check() texts without a Chinese translation: {missing[:5]}"


def test_check_report_in_chinese_keeps_names_and_numbers(capsys):
    from pagedlab.grading import check

    def kv_bytes_per_token(*a, **k):
        return 1

    messages.set_language("zh")
    res = check(kv_bytes_per_token, "01.kv_bytes_per_token", show="text", pictures=False)
    out = capsys.readouterr().out
    assert "练习 01.kv_bytes_per_token: kv_bytes_per_token" in out
    assert "第 1 步（`kv_bytes_per_token(<OPT-13B config>)`）：" in out
    assert "OPT-13B 每个 token 的字节数：期望 819200，实际得到 1" in out  # a template inside a template
    assert "提示：这个配置没有 num_key_value_heads" in out
    assert f"{len(res.outcomes)} 个测试中通过了 0 个。" in out
    assert res.outcomes[0].title.startswith("OPT-13B")  # the result itself stays English
    html = messages.frame(res.html())
    assert "练习 01.kv_bytes_per_token" in html and "（未通过）" in html


def test_pictures_text_is_translated_and_measured_as_drawn():
    from pagedlab.viz import _svg

    assert _svg.text_width("ab", 10) == pytest.approx(12.0)
    assert _svg.text_width("块表", 10) == pytest.approx(20.0)  # CJK: 1 em a character, not 0.6
    assert _svg.text_width("块表", 10, bold=True) > _svg.text_width("ab", 10, bold=True) * 1.4
    messages.set_language("zh")
    assert ">自测 · 实验 02：点击一个答案，看看是否正确<" in _svg.text(
        0, 0, "Self-check, lab 02: click an answer to see if it is right"
    )
    zh_w = _svg.text_width("Self-check, lab 02: click an answer to see if it is right", 12)
    assert zh_w == pytest.approx(
        sum(1.0 if ord(c) > 0x2E80 else 0.6 for c in "自测 · 实验 02：点击一个答案，看看是否正确") * 12
    )
    assert "Noto Sans CJK SC" in _svg.FONT


def test_a_template_value_is_a_whole_unit_not_text_cut_at_a_colon():
    """``step 1 (`the case: f(x)`):`` holds ': ' inside its label: the shorter value of ``step {s}: {events}``
    (``s`` = ``1 (`the case``) is a torn unit, so ``step {n} (`{label}`):`` wins."""
    cat = Catalog.from_po(
        _po(
            (None, "step {n} (`{label}`):", "第 {n} 步（`{label}`）："),
            (None, "step {s}: {events}", "第 {s} 步：{events}"),
            (None, "`{name}` after the call ({rule})", "调用之后的 `{name}`（{rule}）"),
            (None, "{what}: expected {e}, got {g}", "{what}：期望 {e}，实际得到 {g}"),
        ),
        "t",
    )
    assert cat.lookup("step 1 (`the case: f(x)`):") == "第 1 步（`the case: f(x)`）："
    assert cat.lookup("step 3: 2 requests") == "第 3 步：2 requests"
    assert (
        cat.lookup("`k` after the call (rule: r): expected a bool (True), got a str ('x')")
        == "调用之后的 `k`（rule: r）：期望 a bool (True)，实际得到 a str ('x')"
    )
    assert messages._balanced("a (b [c] `d`)") and not messages._balanced("1 (`x") and not messages._balanced("a) (b")
