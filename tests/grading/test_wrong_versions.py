"""The wrong versions of every exercise (tests/grading/wrong_versions/) fail check() at the test their
file names, with a teaching message (the hints it names, none it excludes, no solution code), and
docs/wrong_versions.md lists them all."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from pagedlab.grading import registry
from pagedlab.grading.checking import CheckResult, check
from tests.grading.helpers import PATTERNS, WrongVersion, doc_parts, wrong_versions, wrong_versions_table

VERSIONS = wrong_versions()
DOC = Path(__file__).resolve().parents[2] / "docs" / "wrong_versions.md"


_RESULTS: dict[tuple[str, str], CheckResult] = {}


def _check(v: WrongVersion) -> CheckResult:
    """check() of a wrong version (run once per session: several tests read it)."""
    key = (v.exercise, v.name)
    if key not in _RESULTS:
        _RESULTS[key] = check(registry.snippet_object(v.exercise, v.source), v.exercise, show=False)
    return _RESULTS[key]


def test_every_exercise_has_three_wrong_versions() -> None:
    counts = Counter(v.exercise for v in VERSIONS)
    assert set(counts) == {ex.id for ex in registry.all_exercises()}
    assert min(counts.values()) >= 3, counts


def test_each_names_a_public_test_of_its_exercise() -> None:
    for v in VERSIONS:
        titles = [t.title for t in registry.get(v.exercise).public_tests()]
        assert v.caught_by in titles, f"{v.exercise}/{v.name}: no test titled {v.caught_by!r}"


@pytest.mark.parametrize("v", VERSIONS, ids=[f"{v.exercise}:{v.name}" for v in VERSIONS])
def test_wrong_version_fails_at_the_named_test(v: WrongVersion) -> None:
    res = _check(v)
    first = res.first_failure
    assert first is not None, f"{v.exercise}: the mistake '{v.mistake}' passes every test"
    assert first.title == v.caught_by, res.text()
    assert first.status in ("failed", "error", "timeout"), res.text()
    assert first.message and first.step >= 1, res.text()
    for text in v.hints:
        assert text in first.message, f"hint {text!r} missing:\n{res.text()}"
    for text in v.not_hints:
        assert text not in first.message, f"misleading hint {text!r} shown:\n{res.text()}"
    # a teaching message never shows solution code (the learner's own line, "at line N: ...", may be quoted)
    message = "\n".join(ln for ln in first.message.splitlines() if not ln.strip().startswith("at line"))
    body = registry.snippet_source(v.exercise).split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
    for ln in {ln.strip() for ln in body.splitlines() if len(ln.strip()) > 25}:
        assert ln not in message, f"message reveals solution line {ln!r}"


@pytest.mark.parametrize("eid", sorted({v.exercise for v in VERSIONS}))
def test_a_hint_is_never_shown_for_another_mistake(eid: str) -> None:
    """A hint one wrong version names appears for no other wrong version of the exercise that does not name it."""
    mine = [v for v in VERSIONS if v.exercise == eid]
    for v in mine:
        first = _check(v).first_failure
        assert first is not None, f"{eid}/{v.name} passes every test"
        message = first.message
        for other in mine:
            for text in other.hints:
                assert text in v.hints or text not in message, (
                    f"{eid}: the hint {text!r} (for {other.name}) is shown for {v.name}:\n{message}"
                )


@pytest.mark.parametrize("eid", [ex.id for ex in registry.all_exercises() if ex.render is not None])
def test_failures_come_with_a_picture_of_the_state(eid: str) -> None:
    pictures = [f.picture for v in VERSIONS if v.exercise == eid and (f := _check(v).first_failure) is not None]
    assert any(p.startswith("<svg") and "pl-viz" in p for p in pictures), eid


def test_every_pattern_of_issue_23_has_three_wrong_versions_with_a_hint() -> None:
    """Issue 23's kinds of mistake (inputs changed, rebinding, return types, sizes beyond the defaults, lab 08's
    dtypes, int64 ids, garbage, the GPU-only Triton pitfalls): each stood for by >= 3 wrong versions, each
    failing check() with a hint (test_wrong_version_fails_at_the_named_test checks the hint is in the message)."""
    named = {p for v in VERSIONS for p in v.patterns}
    assert named <= set(PATTERNS), f"unknown pattern names: {named - set(PATTERNS)}"
    for p in PATTERNS:
        mine = [v for v in VERSIONS if p in v.patterns]
        assert len(mine) >= 3, f"{p!r}: only {[v.name for v in mine]}"
        assert all(v.hints for v in mine), f"{p!r}: {[v.name for v in mine if not v.hints]} name no hint"


def test_docs_table_is_current() -> None:
    table = wrong_versions_table(VERSIONS)
    old = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    if os.environ.get("PAGEDLAB_REGEN_DOCS"):
        rest = doc_parts(old)[1]
        DOC.write_text(table + ("\n" + rest if rest else ""), encoding="utf-8")
        old = DOC.read_text(encoding="utf-8")
    assert doc_parts(old)[0] == table, (
        "docs/wrong_versions.md is stale: run PAGEDLAB_REGEN_DOCS=1 pytest tests/grading/test_wrong_versions.py"
    )
