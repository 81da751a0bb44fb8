"""check()'s marks are readable without an emoji font (Debian's DejaVu) and colored as a second signal."""

from __future__ import annotations

import os
import re
from pathlib import Path

import matplotlib
import pytest
from fontTools.ttLib import TTFont

from pagedlab.grading import check, registry
from pagedlab.grading.checking import COLOR, MARK
from tests.grading.helpers import variant

#: DejaVu Sans as matplotlib ships it (always here) and as Debian installs it (fonts-dejavu-core), if present.
FONTS = [
    Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf",
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
]


def _cmaps() -> list[set[int]]:
    return [set(TTFont(str(f)).getBestCmap()) for f in FONTS if f.is_file()]


def _missing(text: str) -> set[str]:
    """Non-ASCII characters of ``text`` some DejaVu Sans lacks (emoji, variation selectors ...)."""
    return {ch for ch in text if ord(ch) > 127 and any(ord(ch) not in cmap for cmap in _cmaps())}


def test_every_mark_is_a_dejavu_glyph_and_failing_differs_from_passing() -> None:
    assert _cmaps(), "no DejaVu Sans found"
    assert not _missing("".join(MARK.values())), _missing("".join(MARK.values()))
    assert all(len(m) == 1 for m in MARK.values())  # one glyph: no emoji variation selector (U+FE0F)
    bad = {"failed", "error", "timeout"}
    assert MARK["passed"] not in {MARK[s] for s in bad | {"not_implemented", "skipped", "internal"}}
    assert COLOR["passed"] not in {COLOR[s] for s in bad} and set(COLOR) == set(MARK)


@pytest.mark.parametrize("how", ["text", "html"])
def test_a_report_with_passed_and_failed_tests_reads_in_dejavu_alone(
    how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = registry.snippet_object(
        "03.append_token", variant("03.append_token", ("if pool.ref_cnt(last) > 1:", "if False:"))
    )
    res = check(bad, show=False)
    statuses = [o.status for o in res.outcomes]
    assert "passed" in statuses and "failed" in statuses
    if how == "text":
        out = res.text()
        rows = [ln.strip() for ln in out.splitlines() if ln.startswith("  ") and not ln.startswith("   ")]
        assert [r[0] for r in rows] == [MARK[s] for s in statuses]  # each test's row starts with its mark
    else:
        out = res.html()
        marks = re.findall(r'<span class="pl-mark" style="color:(#[0-9a-f]{6});font-weight:bold">(.)</span>', out)
        assert marks == [(COLOR[s], MARK[s]) for s in statuses]
    assert not _missing(out), f"characters DejaVu Sans lacks: {_missing(out)}"


def test_the_all_passed_line_has_no_emoji() -> None:
    res = check(registry.snippet_object("02.slot_mapping"), show=False)
    assert res.passed and not _missing(res.text()) and not _missing(res.html())
    assert os.linesep not in MARK["passed"]
