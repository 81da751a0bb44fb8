"""Small SVG helpers shared by the renderers: escaping, owner colours, the card frame.

Every renderer returns one self-contained ``<svg>`` string: no external CSS, fonts or scripts,
so the same string works in JupyterLab (light or dark theme), VS Code, Colab, a static HTML
export and a unit test that parses it with ``xml.etree``. Readability in both themes comes from
drawing each figure on its own light "card" (a rounded background rect) with dark text, instead
of relying on the host page's colours.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import asdict, is_dataclass
from html import escape
from typing import Any

from pagedlab.i18n import tr

SVG_NS = "http://www.w3.org/2000/svg"

#: Owner palette: Okabe-Ito / Tableau-like hues that stay distinct for colour-blind readers and
#: keep dark text legible on top (all have luminance > ~0.25).
PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#ff9da7",
    "#9c755f",
    "#86bcb6",
    "#d4a6c8",
    "#a0cbe8",
]
#: Fixed colours for states and special owners.
COLORS = {
    "card": "#fbfbfd",
    "card_stroke": "#c9ccd6",
    "text": "#1f2430",
    "muted": "#5c6370",
    "grid": "#e3e5eb",
    "empty": "#eef0f4",  # free block, no cached content
    "empty_stroke": "#b8bcc8",
    "cached": "#d9e7f5",  # free block whose hash is kept (evictable prefix-cache entry)
    "cached_stroke": "#4e79a7",
    "radix": "#8d99ae",  # blocks owned by the radix tree
    "shared": "#1f2430",  # outline of ref_cnt > 1 blocks
    "cow": "#d62728",  # copy-on-write arrows and outlines
    "prefill": "#4e79a7",
    "decode": "#59a14f",
    "preempt": "#d62728",
    "masked": "#d0d3da",
    "highlight": "#ffbf00",
    "waiting": "#f28e2b",
    "running": "#59a14f",
    "swapped": "#b07aa1",
}
#: DejaVu Sans first (the widths below are measured for it), then CJK fonts per platform for Chinese
#: text (the browser falls back glyph by glyph): Noto Sans CJK SC (Debian/Ubuntu: fonts-noto-cjk;
#: pagedlab.i18n.fonts), Source Han Sans SC, PingFang SC (macOS), Microsoft YaHei (Windows), WenQuanYi.
FONT = (
    "font-family:'DejaVu Sans',Arial,Helvetica,'Noto Sans CJK SC','Noto Sans SC','Source Han Sans SC',"
    "'PingFang SC','Hiragino Sans GB','Microsoft YaHei','WenQuanYi Micro Hei',sans-serif"
)


def esc(value: Any) -> str:
    """Escape text or an attribute value for XML (quotes included)."""
    return escape(str(value), quote=True)


def owner_color(owner: str | None) -> str:
    """Stable colour of a request id.

    Ids ending in a number (``"0"``, ``"q07"``, ``"3#1"``: completion 1 of request 3) cycle through
    :data:`PALETTE` by that number, so consecutive requests of a run get clearly different colours;
    other names are hashed with SHA-1 (stable across processes, unlike ``hash``). ``"radix"``
    (blocks the radix tree holds) is grey.
    """
    if owner is None:
        return COLORS["empty"]
    owner = str(owner)
    if owner == "radix":
        return COLORS["radix"]
    # Display only: a picture has ids, not the engine, so a fork child's colour follows the engine's
    # naming ("<request id>#<k>", LLMEngine._fresh_request_id). Grouping logic must never parse ids;
    # it asks the engine (LLMEngine.get_request_group_id). A wrong guess here only shifts a colour.
    base, _, sub = owner.partition("#")
    digits = re.search(r"(\d+)$", base)
    if digits:
        idx = int(digits.group(1)) + (int(sub) * 5 if sub.isdigit() else 0)
    else:
        idx = int(hashlib.sha1(owner.encode()).hexdigest()[:8], 16)
    return PALETTE[idx % len(PALETTE)]


def as_dict(obj: Any) -> dict[str, Any]:
    """A dataclass (e.g. ``StepStats``) or mapping as a plain dict."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    if isinstance(obj, dict):
        return obj
    return dict(vars(obj))


def attrs(**kw: Any) -> str:
    """``key="value"`` pairs; ``data_step`` becomes ``data-step``; ``None`` values are dropped."""
    parts = []
    for k, v in kw.items():
        if v is None:
            continue
        name = "class" if k == "cls" else k.replace("_", "-")
        if isinstance(v, bool):
            v = int(v)
        parts.append(f'{name}="{esc(v)}"')
    return " ".join(parts)


def _em(ch: str, bold: bool) -> float:
    """Width of one character in em: a wide (CJK, full-width) character is about 1 em in any CJK font."""
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return 1.02 if bold else 1.0
    return 0.68 if bold else 0.6


def text_width(s: Any, size: float, bold: bool = False) -> float:
    """A generous estimate of the drawn width (px) of ``s`` at font ``size`` in ``FONT``, as :func:`text`
    draws it (in the learner's language): DejaVu Sans averages about 0.6 em a character (0.68 em in bold),
    a CJK character is 1 em. Layouts size themselves with it so that no title or label runs past the
    picture's edge."""
    return sum(_em(ch, bold) for ch in tr(str(s))) * size


def text(
    x: float,
    y: float,
    s: Any,
    size: int = 12,
    color: str = COLORS["text"],
    anchor: str = "start",
    weight: str = "normal",
    cls: str | None = None,
    **data: Any,
) -> str:
    """One ``<text>`` element (dominant-baseline central, so ``y`` is the visual middle); ``s`` is shown in
    the learner's language (:func:`pagedlab.i18n.tr`: every picture's text passes here)."""
    a = attrs(cls=cls, **data)
    s = tr(str(s))
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{color}" text-anchor="{anchor}" '
        f'dominant-baseline="central" font-weight="{weight}"{" " + a if a else ""}>{esc(s)}</text>'
    )


def svg_doc(
    width: float,
    height: float,
    body: Iterable[str],
    cls: str,
    title: str | None = None,
    max_width: int = 900,
    **data: Any,
) -> str:
    """Wrap ``body`` in a self-contained ``<svg>`` on a light card.

    The ``viewBox`` keeps the drawing's own coordinates; the ``width`` attribute is capped at
    ``max_width`` px so large figures scale down instead of overflowing the notebook.
    """
    w, h = float(width), float(height)
    shown_w = min(w, max_width)
    shown_h = h * shown_w / w
    head = (
        f'<svg xmlns="{SVG_NS}" class="pl-viz {esc(cls)}" {attrs(**data)} '
        f'width="{shown_w:.0f}" height="{shown_h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" '
        f'style="{FONT};max-width:100%;height:auto" role="img">'
    )
    parts: list[str] = [head]
    if title:
        parts.append(f"<title>{esc(tr(title))}</title>")
    parts.append(
        f'<rect class="pl-card" x="0.5" y="0.5" width="{w - 1:.0f}" height="{h - 1:.0f}" rx="8" '
        f'fill="{COLORS["card"]}" stroke="{COLORS["card_stroke"]}"/>'
    )
    parts.extend(body)
    parts.append("</svg>")
    return "".join(parts)


def legend(x: float, y: float, items: list[tuple], max_width: float, size: int = 11) -> tuple:
    """Swatches with labels, wrapping to new rows; ``items`` are ``(label, fill, stroke, dash)``.

    Returns:
        ``(svg_parts, height_used)``.
    """
    parts, cx, cy, row_h = [], x, y, 18
    for label, fill, stroke, dash in items:
        w = 16 + 6 + int(text_width(label, size)) + 14
        if cx + w > x + max_width and cx > x:
            cx, cy = x, cy + row_h
        d = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<g class="pl-legend-item" data-label="{esc(label)}">'
            f'<rect x="{cx:.1f}" y="{cy:.1f}" width="16" height="12" rx="2" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.5"{d}/>'
            + text(cx + 22, cy + 6, label, size=size, color=COLORS["muted"])
            + "</g>"
        )
        cx += w
    return parts, (cy - y) + row_h
