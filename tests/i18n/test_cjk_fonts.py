"""Chinese text renders: matplotlib finds a CJK font (fonts-noto-cjk on Debian, .ci/run and binder/apt.txt install
it) and draws a figure with Chinese labels without a missing-glyph warning."""

from __future__ import annotations

import io
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pagedlab.i18n import fonts, messages  # noqa: E402

LABELS = ("显存碎片与块表", "步数", "空闲块 − 已用块")


def _draw() -> list[str]:
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0], label=LABELS[2])
    ax.set_title(LABELS[0])
    ax.set_xlabel(LABELS[1])
    ax.legend()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def test_chinese_figure_renders_without_missing_glyphs():
    before = list(matplotlib.rcParams["font.family"])
    try:
        found = messages.set_language("zh") and fonts.installed_cjk_font()
        assert found, "no CJK font: install fonts-noto-cjk (Debian/Ubuntu) or see pagedlab/i18n/fonts.py"
        assert matplotlib.rcParams["font.family"][:2] == ["DejaVu Sans", found]
        assert _draw() == []
        # the same figure with the default font list shows the problem the fallback fixes
        matplotlib.rcParams["font.family"] = ["sans-serif"]
        assert any("CJK" in m for m in _draw())
    finally:
        matplotlib.rcParams["font.family"] = before
        messages.set_language(None)


def test_ci_and_binder_install_the_font():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    assert "fonts-noto-cjk" in (repo / ".ci" / "run").read_text()
    assert "fonts-noto-cjk" in (repo / "binder" / "apt.txt").read_text().split()


def test_svg_font_list_puts_dejavu_first_then_cjk_fallbacks():
    from pagedlab.viz import _svg

    names = [f.strip("'") for f in _svg.FONT.split(":", 1)[1].split(",")]
    assert names[0] == "DejaVu Sans" and names[-1] == "sans-serif"
    for family in ("Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei"):
        assert family in names and family in fonts.CJK_FAMILIES
