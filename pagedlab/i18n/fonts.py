"""Fonts for Chinese text in matplotlib figures (the SVG pictures name theirs in ``pagedlab.viz._svg.FONT``).

matplotlib (3.6+) falls back glyph by glyph along ``font.sans-serif``: DejaVu Sans first (Latin text looks
as before), then the first CJK font installed. Where to get one:

* Debian/Ubuntu (and CI, Binder): ``apt-get install fonts-noto-cjk`` (Noto Sans CJK SC);
* macOS: PingFang SC / Hiragino Sans GB ship with the system;
* Windows: Microsoft YaHei ships with the system;
* conda: ``conda install -c conda-forge font-ttf-noto-cjk`` (or any family of :data:`CJK_FAMILIES`).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CJK_FAMILIES", "use_cjk_fonts", "installed_cjk_font"]

#: CJK families tried in order, after DejaVu Sans.
CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "PingFang SC",
    "Hiragino Sans GB",
    "Microsoft YaHei",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
)


#: Font file names (lower case) that hold one of :data:`CJK_FAMILIES`.
_CJK_FILES = ("cjk", "sourcehansans", "notosanssc", "pingfang", "hiragino", "msyh", "wqy")


def installed_cjk_font() -> str | None:
    """The first of :data:`CJK_FAMILIES` matplotlib finds on this machine, or None.

    matplotlib lists the system's fonts once and caches the list; a CJK font installed after that (the
    learner ran ``apt-get install fonts-noto-cjk`` later) is added from the system's font folders here.
    """
    from matplotlib import font_manager  # lazy: start-up time (matplotlib, ~0.5 s)

    def found() -> str | None:
        have = {f.name for f in font_manager.fontManager.ttflist}
        return next((f for f in CJK_FAMILIES if f in have), None)

    if found() is None:
        known = {f.fname for f in font_manager.fontManager.ttflist}
        for path in font_manager.findSystemFonts():
            name = Path(path).name.lower().replace("-", "").replace("_", "")
            if path not in known and any(k in name for k in _CJK_FILES):
                font_manager.fontManager.addfont(path)
    return found()


def use_cjk_fonts() -> str | None:
    """Make matplotlib draw Chinese text: its font list becomes DejaVu Sans, then the first installed family
    of :data:`CJK_FAMILIES` (matplotlib falls back glyph by glyph only along ``font.family``, not inside the
    generic ``sans-serif``). Idempotent. Returns that CJK family, or None when none is installed (Chinese
    labels would show as boxes, with matplotlib's "Glyph ... missing" warning: install one, see above)."""
    import matplotlib as mpl  # lazy: start-up time (matplotlib, ~0.5 s)

    found = installed_cjk_font()
    if found is not None:
        mpl.rcParams["font.family"] = ["DejaVu Sans", found, "sans-serif"]
        mpl.rcParams["axes.unicode_minus"] = False  # CJK fonts often lack U+2212
    return found
