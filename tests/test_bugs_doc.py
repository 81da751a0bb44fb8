"""docs/bugs.md: every "bug Bn" the kit cites resolves there, and every entry names a guard that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUGS = ROOT / "docs" / "bugs.md"
SEARCHED = ("pagedlab", "tests", "solutions")
# A citation: "bug B10", "bugs.md#b10", "[B10](", or a regression test named test_B10_...
CITATION = re.compile(r"\bbug (B\d+)\b|bugs\.md#(b\d+)\b|\[(B\d+)\]\(|\btest_(B\d+)_")
BUG_WORD = re.compile(r"\bbug (B\d+)\b")


def _sources() -> list[Path]:
    return [
        p
        for d in SEARCHED
        for p in sorted((ROOT / d).rglob("*"))
        if p.suffix in (".py", ".ipynb", ".md") and ".ipynb_checkpoints" not in p.parts
    ]


def _headings() -> set[str]:
    return {m.lower() for m in re.findall(r"^## (B\d+)\s*$", BUGS.read_text(), flags=re.MULTILINE)}


def cited_ids(text: str) -> set[str]:
    """The bug ids (lower case, e.g. ``"b10"``) that ``text`` cites."""
    return {next(g for g in m.groups() if g).lower() for m in CITATION.finditer(text)}


def unlinked_mentions(text: str) -> list[str]:
    """Each "bug Bn" in ``text`` without a link to ``bugs.md#bn`` within the next 40 characters."""
    return [
        m.group(0)
        for m in BUG_WORD.finditer(text)
        if f"bugs.md#{m.group(1).lower()}" not in text[m.start() : m.end() + 40]
    ]


def test_citation_patterns_on_examples() -> None:
    text = "bug B10, docs/bugs.md#b10; [B2](../docs/bugs.md#b2); def test_B16_x(); block size B; B-1"
    assert cited_ids(text) == {"b10", "b2", "b16"}
    assert unlinked_mentions("see bug B3 and bug B5, docs/bugs.md#b5") == ["bug B3"]


def test_every_cited_bug_resolves_to_a_heading() -> None:
    headings = _headings()
    assert len(headings) >= 10
    cited = {(i, p.relative_to(ROOT).as_posix()) for p in _sources() for i in cited_ids(p.read_text())}
    assert {i for i, _ in cited} >= {"b1", "b8", "b10", "b16"}, "the scan found too few citations"
    missing = sorted((i, p) for i, p in cited if i not in headings)
    assert not missing, f"cited but no '## Bn' heading in docs/bugs.md: {missing}"


@pytest.mark.parametrize("folder", ["pagedlab", "solutions"])
def test_every_bug_mention_links_to_bugs_md(folder: str) -> None:
    bad = {
        p.relative_to(ROOT).as_posix(): unlinked_mentions(p.read_text())
        for p in _sources()
        if p.relative_to(ROOT).parts[0] == folder
    }
    assert not {k: v for k, v in bad.items() if v}, "write 'bug Bn, docs/bugs.md#bn' (or a markdown link)"


def test_every_entry_names_a_guard_test_that_exists() -> None:
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    defined = set(re.findall(r"^def (test_\w+)", tests, flags=re.MULTILINE))
    sections = re.split(r"^## (B\d+)\s*$", BUGS.read_text(), flags=re.MULTILINE)[1:]
    for bug, body in zip(sections[::2], sections[1::2]):
        guards = re.findall(r"\*\*Guard:\*\*.*?(?=\n\n|\Z)", body, flags=re.DOTALL)
        assert guards, f"{bug} names no guard"
        names = re.findall(r"`(test_\w+)`", guards[0])
        assert names, f"{bug}'s guard names no test"
        assert set(names) <= defined, f"{bug} names tests that do not exist: {set(names) - defined}"
        assert "https://github.com/" in body, f"{bug} links no public issue or pull request"
