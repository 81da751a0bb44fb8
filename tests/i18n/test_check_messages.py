"""check()'s learner-facing text of labs 03-09 in Chinese (pagedlab/i18n/zh.po): every hint, observed value's
label and invariant the exercises write has a catalog entry (read from the exercise modules' source), and a real
check() of wrong versions reads as Chinese, with names, numbers and code left as they are."""

from __future__ import annotations

import ast
import io
import itertools
import re
from pathlib import Path

import pytest

from pagedlab.i18n import messages
from pagedlab.i18n.check import localized

REPO = Path(__file__).resolve().parents[2]
EXERCISES = sorted((REPO / "pagedlab" / "course" / "exercises").glob("lab0[3-9]*.py"))
#: a formatted value's stand-in: any value fills a template's {placeholder}
SAMPLE = "7"
#: an observed value's label that is a name (``mask``, ``num_computed_tokens``) stays English
NAME = re.compile(r"^[\w.]+$")


def _texts(node: ast.AST) -> list[str] | None:
    """Every text a string expression can produce (each branch of a conditional, each formatted value as
    :data:`SAMPLE`); None if ``node`` is not a string expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list[list[str]] = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append([str(v.value)])
            else:
                assert isinstance(v, ast.FormattedValue)
                inner = _texts(v.value) if isinstance(v.value, (ast.IfExp, ast.JoinedStr)) else None
                parts.append(inner or [SAMPLE])
        return ["".join(p) for p in itertools.product(*parts)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _texts(node.left), _texts(node.right)
        return None if a is None or b is None else [x + y for x in a for y in b]
    if isinstance(node, ast.IfExp):
        a, b = _texts(node.body), _texts(node.orelse)
        return None if a is None and b is None else (a or []) + (b or [])
    return None


def learner_texts(path: Path) -> list[tuple[str, str]]:  # noqa: C901 - one branch per kind of learner text
    """``(where, text)`` of what an exercise module shows a learner through check(): the ``hint=`` of each
    observed value and its label (``rec.observe(label, ...)``), what the hint and invariant functions return,
    the invariants' names."""
    out: list[tuple[str, str]] = []

    def add(node: ast.AST, what: str) -> None:
        for t in _texts(node) or []:
            if t.strip() and not NAME.match(t):
                out.append((f"{path.name}:{getattr(node, 'lineno', '?')} ({what})", t))

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            if "hint" in node.name or "invariant" in node.name:
                for n in ast.walk(node):
                    if isinstance(n, ast.Return) and n.value is not None:
                        add(n.value, f"{node.name} returns")
            for arg, default in zip(node.args.args[-len(node.args.defaults) :], node.args.defaults):
                if "hint" in arg.arg:
                    add(default, f"default {arg.arg}")
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg is not None and "hint" in kw.arg:
                    add(kw.value, kw.arg)
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "observe" and node.args:
                add(node.args[0], "observed value's label")
            if (
                isinstance(f, ast.Attribute)
                and f.attr == "append"
                and isinstance(f.value, ast.Attribute)
                and f.value.attr == "invariants"
                and node.args
                and isinstance(node.args[0], ast.Tuple)
            ):
                add(node.args[0].elts[0], "invariant")
    return out


def test_the_extraction_finds_what_the_exercises_write():
    """A guard for the test below: it reads hints, labels, invariants and hint functions of every lab."""
    found = {p.name: learner_texts(p) for p in EXERCISES}
    assert {p.name[:5] for p in EXERCISES} >= {"lab03", "lab04", "lab05", "lab06", "lab07", "lab08"}
    assert all(found.values()), [k for k, v in found.items() if not v]
    texts = {t for v in found.values() for _, t in v}
    assert "a sequence writes only into a block it holds alone" in texts  # an invariant (lab 03)
    assert "count the new token: seq.num_tokens += 1" in texts  # a hint= (lab 03)
    assert (
        f"{SAMPLE} holds {SAMPLE} KV block(s), {SAMPLE} expected: call allocate_slots once per scheduled"
        in " ".join(texts)
    )  # a hint function's f-string (lab 04)
    assert sum(len(v) for v in found.values()) > 200


def test_every_hint_label_and_invariant_of_labs_03_to_09_has_a_chinese_entry():
    cat = messages.catalog("zh")
    missing = [(where, t) for p in EXERCISES for where, t in learner_texts(p) if cat.lookup(t) is None]
    assert not missing, (
        f"{len(missing)} learner-facing text(s) of labs 03-09 without an entry in pagedlab/i18n/zh.po "
        f"(msgid = the English with {{name}} for each formatted value): {missing[:8]}"
    )


def test_every_translation_keeps_the_format_fields_of_its_english():
    from babel.messages.pofile import read_po

    text = (REPO / "pagedlab" / "i18n" / "zh.po").read_text(encoding="utf-8")
    entries = [m for m in read_po(io.StringIO(text)) if m.id and m.string]
    fields = re.compile(r"\{[^{}]*\}")
    wrong = [
        (m.id, m.string)
        for m in entries
        if sorted(f for f in fields.findall(str(m.id)) if messages.placeholders(f))
        != sorted(f for f in fields.findall(str(m.string)) if messages.placeholders(f))
    ]
    assert not wrong, f"translations whose {{fields}} differ from the English: {wrong[:5]}"
    assert sum(bool(messages.placeholders(str(m.id))) for m in entries) > 100


#: four or more English words in a row: a sentence left untranslated
ENGLISH = re.compile(r"\b[A-Za-z][a-z']*(?:[ ,;]+[A-Za-z][a-z']*){3,}\b")


def _prose(line: str) -> str:
    """A line of the Chinese report without what stays English: code spans, quoted values, lists, the learner's
    own line (``at line N:``), a random case's description and the text of an exception the code raised."""
    if line.strip().startswith("at line"):
        return ""
    line = re.split(r"用例：|个用例中的第 \d+ 个：|你的代码抛出了 ", line)[0]
    line = re.sub(r"`[^`]*`", " ", line)
    line = re.sub(r'"[^"]*("|$)', " ", line)  # a long value's repr may be cut off before its closing quote
    line = re.sub(r"'[^']*'", " ", line)
    while re.search(r"\[[^\[\]]*\]", line):
        line = re.sub(r"\[[^\[\]]*\]", " ", line)
    return line


def _wrong_versions():
    from tests.grading.helpers import wrong_versions

    by_exercise: dict[str, list] = {}
    for v in sorted(wrong_versions(), key=lambda v: (v.exercise, v.name)):
        if "03" <= v.exercise[:2] <= "09":
            by_exercise.setdefault(v.exercise, []).append(v)
    return [vs[0] for vs in by_exercise.values()]  # one an exercise: the catalog itself is checked above


@pytest.mark.parametrize("v", _wrong_versions(), ids=lambda v: f"{v.exercise}:{v.name}")
def test_a_wrong_versions_report_reads_as_chinese(v):
    from pagedlab.grading import check, registry

    messages.set_language("en")
    try:
        res = check(registry.snippet_object(v.exercise, v.source), v.exercise, show=False)
        messages.set_language("zh")
        zh = localized(res)
    finally:
        messages.set_language(None)
    first = next(o for o in zh.outcomes if o.message)
    report = "\n".join([zh.summary, first.title, first.message, getattr(first, "invariant", "") or ""])
    assert re.search(r"[\u4e00-\u9fff]", first.message), report
    english = [(ln, m.group()) for ln in report.splitlines() if (m := ENGLISH.search(_prose(ln)))]
    assert not english, f"{v.exercise}/{v.name}: English left in the Chinese report: {english[:4]}\n{report}"
    assert res.outcomes[0].title == registry.get(v.exercise).tests[0].title  # the result itself stays English


def test_the_captions_and_reports_of_labs_03_to_08_read_as_chinese():
    """What the analysis modules print or caption (pagedlab.analysis: the CoW story's frames, lab 04's latency
    account, lab 08's overhead report) passes through the catalog where it is shown."""
    import importlib.util
    import statistics

    from pagedlab.analysis import lab03
    from pagedlab.analysis.lab08 import PagedOverhead
    from pagedlab.viz.player import Player

    def solution(name: str, fn: str):
        path = REPO / "pagedlab" / "course" / "exercises" / "solutions" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, fn)

    story = lab03.cow_story(solution("03_fork", "fork"), solution("03_append_token", "append_token"))
    captions = [c for _, c in story]
    assert len(captions) > 5 and any("(CoW)" in c for c in captions) and any("a new block" in c for c in captions)
    messages.set_language("zh")
    try:
        player = Player([s for s, _ in story], render=lambda s: "", caption=captions)
        shown = [messages.tr_lines(player.caption_text(i)) for i in range(len(captions))]
        overhead = PagedOverhead([1e-3, 2e-3], [1e-3, 1.5e-3], "torch (gather + SDPA)", 1e-7, "2 seqs x 64 tokens")
        report = overhead.report()
    finally:
        messages.set_language(None)
    for en, zh in zip(captions, shown):
        assert re.search(r"[\u4e00-\u9fff]", zh) and not ENGLISH.search(_prose(zh)), (en, zh)
    assert "写时复制" in " ".join(shown)
    for line in report.splitlines():
        assert re.search(r"[\u4e00-\u9fff]", line) and not ENGLISH.search(_prose(line)), line
    assert f"{statistics.median([1e-3, 2e-3]) * 1e3:.3f} ms" in report  # the figures stay


def test_the_capstone_report_reads_as_chinese_around_its_table():
    """Lab 09's capstone prints its report through the catalog: the heading, the notes on the parts the kit
    lent, the speed line (the table's rows are names, marks and figures)."""
    from pagedlab.course.capstone import INVARIANCE, CapstoneReport, Row

    class Table:
        def table(self) -> str:
            return "  free_queue  yours"

    whys = sorted({why for _, _, kit_only in INVARIANCE for why in kit_only.values()})
    notes = ["schedule_step: kit's part, because x", *(f"kit's schedule_step: {w}" for w in whys)]
    report = CapstoneReport(Table(), notes, [Row("block_size 1", True, ["free_queue"], 1.0)], 2.0, 3.0)  # type: ignore[arg-type]
    zh = messages.tr_lines(report.text(), "zh").splitlines()
    assert zh[0] == "你的引擎：" and zh[-1].startswith("速度：你的引擎 3.0s，本套件的 2.0s（比值 1.50）")
    for line in zh[2 : 2 + len(notes)]:
        assert line.startswith("  注 - ") and not ENGLISH.search(_prose(line)), line
