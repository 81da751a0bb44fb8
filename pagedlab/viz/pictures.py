"""Pictures for failure reports and lab helpers.

Most exercises draw with the other :mod:`pagedlab.viz` modules (block pool, block table, radix tree,
batch Gantt, kernel walk). The few shapes they have no renderer for are drawn here, in the same
style (a light card, dark text, ``pl-viz`` class): a free queue as a row of blocks, a contiguous
token arena, and a list of running requests.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from pagedlab.viz._svg import COLORS, attrs, owner_color, svg_doc, text, text_width

__all__ = ["render_queue_rows", "render_arena", "render_requests", "pool_snapshot", "side_by_side"]


def render_queue_rows(
    rows: Sequence[tuple[str, Sequence[Any], int | None]], title: str = "free queue", step: int = 0
) -> str:
    """Rows of boxes, front on the left: ``(label, items, index to mark red or None)``."""
    cell, gap, top = 30.0, 4.0, 40.0
    left = max([150.0] + [12 + text_width(label, 12) + 10 for label, _, _ in rows])
    width = max(
        left + max([len(items) for _, items, _ in rows] + [4]) * (cell + gap) + 20,
        12 + text_width(title, 13, bold=True) + 12,
    )
    height = top + len(rows) * (cell + 22) + 10
    body = [text(12, 18, title, size=13, weight="bold")]
    for r, (label, items, bad) in enumerate(rows):
        y = top + r * (cell + 22)
        body.append(text(12, y + cell / 2, label, size=12, color=COLORS["muted"]))
        if not items:
            body.append(text(left, y + cell / 2, "(empty)", size=11, color=COLORS["muted"]))
        for i, item in enumerate(items):
            x = left + i * (cell + gap)
            stroke = COLORS["cow"] if bad is not None and i == bad else COLORS["empty_stroke"]
            sw = 3 if bad is not None and i == bad else 1
            hooks = attrs(
                cls="pl-queue-item",
                x=f"{x:.1f}",
                y=f"{y:.1f}",
                width=cell,
                height=cell,
                rx=3,
                fill=COLORS["cached"],
                stroke=stroke,
                stroke_width=sw,
                data_index=i,
                data_block_id=item,
            )
            body.append(f"<rect {hooks}/>")
            body.append(text(x + cell / 2, y + cell / 2, item, size=11, anchor="middle"))
        if items and r == 0:
            body.append(text(left + cell / 2, y + cell + 9, "front", size=9, color=COLORS["muted"], anchor="middle"))
    return svg_doc(width, height, body, "pl-queue", title=title, data_step=step)


_ARENA_COLORS = {
    "used": "#4e79a7",
    "reservation": "#a0cbe8",
    "internal": "#f28e2b",
    "external": "#e15759",
    "free": COLORS["empty"],
}


def render_arena(
    snapshot: dict[str, Any], accounting: dict[str, int] | None = None, title: str = "contiguous KV arena"
) -> str:
    """A token arena: each request's reserved segment split into used / reserved-for-later /
    internal waste, and the holes between segments (external fragmentation in red when too small
    for the next request)."""
    cap = max(1, int(snapshot.get("capacity", 1)))
    need = int(snapshot.get("next_request_size", 0))
    width, left, bar_h, top = 760.0, 16.0, 34.0, 40.0
    scale = (width - 2 * left) / cap
    body = [text(12, 18, f"{title}: {cap} token slots; next request needs {need}", size=13, weight="bold")]
    reqs = sorted(snapshot.get("requests", []), key=lambda r: r.get("start", 0))
    pos = 0

    def seg(x0: float, n: int, kind: str, label: str = "") -> None:
        if n <= 0:
            return
        x = left + x0 * scale
        hooks = attrs(
            cls="pl-arena-seg",
            x=f"{x:.1f}",
            y=top,
            width=f"{max(n * scale, 0.5):.1f}",
            height=bar_h,
            fill=_ARENA_COLORS[kind],
            stroke="#ffffff",
            stroke_width=0.5,
            data_kind=kind,
            data_tokens=n,
        )
        body.append(f"<rect {hooks}/>")
        if label and n * scale > 24:
            body.append(text(x + n * scale / 2, top + bar_h / 2, label, size=10, anchor="middle"))

    for r in reqs:
        start, size = int(r.get("start", 0)), int(r.get("reserved", 0))
        if start > pos:
            hole = start - pos
            seg(pos, hole, "external" if hole < need else "free")
        used, final = int(r.get("num_tokens", 0)), int(r.get("final_len", 0))
        seg(start, used, "used", str(r.get("id", "")))
        seg(start + used, max(final - used, 0), "reservation")
        seg(start + max(final, used), max(size - max(final, used), 0), "internal")
        pos = max(pos, start + size)
    if cap > pos:
        seg(pos, cap - pos, "external" if cap - pos < need else "free")
    y = top + bar_h + 20
    x = left
    for kind, color in _ARENA_COLORS.items():
        body.append(
            f'<rect x="{x:.1f}" y="{y - 6:.1f}" width="14" height="12" fill="{color}" '
            f'stroke="{COLORS["empty_stroke"]}"/>'
        )
        label = kind if accounting is None else f"{kind} {accounting.get(kind, '?')}"
        body.append(text(x + 19, y, label, size=11, color=COLORS["muted"]))
        x += 30 + len(label) * 7
    return svg_doc(width, y + 18, body, "pl-arena", title=title)


def render_requests(
    requests: Sequence[dict[str, Any]],
    marks: dict[str, tuple[str, str]],
    title: str = "running requests (running order)",
) -> str:
    """Requests as boxes in running order with ``priority`` / ``arrival`` labels; ``marks`` maps a
    request id to ``(label, colour)`` (e.g. the expected and the chosen victim)."""
    w, h, gap, left, top = 92.0, 50.0, 10.0, 14.0, 34.0
    width = max(left * 2 + max(len(requests), 3) * (w + gap), 24 + len(title) * 7.2)
    body = [text(12, 16, title, size=13, weight="bold")]
    for i, r in enumerate(requests):
        x = left + i * (w + gap)
        rid = str(r.get("request_id"))
        label, color = marks.get(rid, ("", COLORS["empty_stroke"]))
        sw = 3 if label else 1
        hooks = attrs(
            cls="pl-request",
            x=f"{x:.1f}",
            y=top,
            width=w,
            height=h,
            rx=4,
            fill=owner_color(rid),
            fill_opacity=0.35,
            stroke=color,
            stroke_width=sw,
            data_owner=rid,
        )
        body.append(f"<rect {hooks}/>")
        body.append(text(x + w / 2, top + 12, rid, size=12, anchor="middle", weight="bold"))
        body.append(text(x + w / 2, top + 28, f"prio {r.get('priority')}", size=10, anchor="middle"))
        body.append(text(x + w / 2, top + 41, f"arrival {r.get('arrival_time')}", size=10, anchor="middle"))
        if label:
            body.append(text(x + w / 2, top + h + 12, label, size=10, anchor="middle", color=color))
    return svg_doc(width, top + h + 28, body, "pl-requests", title=title)


def pool_snapshot(
    ref_cnts: Sequence[int],
    tables: Mapping[str, Sequence[int]],
    free_queue: Sequence[int] = (),
    step: int = 0,
    cow_pairs: Sequence[Sequence[int]] = (),
) -> dict[str, Any]:
    """A ``pagedlab.trace`` pool snapshot from reference counts and block tables (owners derived)."""
    owners: list[list[str]] = [[] for _ in ref_cnts]
    for sid, table in tables.items():
        for b in dict.fromkeys(int(x) for x in table):
            if 0 <= b < len(owners):
                owners[b].append(str(sid))
    return {
        "step": step,
        "num_gpu_blocks": len(ref_cnts),
        "num_free_blocks": sum(1 for r in ref_cnts if r == 0),
        "free_queue": [int(b) for b in free_queue],
        "blocks": [
            {
                "block_id": i,
                "ref_cnt": int(r),
                "owners": sorted(owners[i]),
                "hashed": False,
                "free": int(r) == 0,
                "block_hash": None,
            }
            for i, r in enumerate(ref_cnts)
        ],
        "pending_copies": [list(p) for p in cow_pairs],
    }


_CELL_STYLE = "flex:1 1 380px;min-width:300px"


def side_by_side(picture: str, expected_picture: str = "") -> str:
    """HTML showing the learner's picture and the reference's next to each other."""
    if not picture and not expected_picture:
        return ""
    cells = []
    if picture:
        cells.append(f'<div style="{_CELL_STYLE}"><div style="font-weight:bold">your state</div>{picture}</div>')
    if expected_picture:
        cells.append(f'<div style="{_CELL_STYLE}"><div style="font-weight:bold">expected</div>{expected_picture}</div>')
    return '<div class="pl-check-pictures" style="display:flex;flex-wrap:wrap;gap:12px">' + "".join(cells) + "</div>"


def esc_html(s: Any) -> str:
    return html.escape(str(s), quote=True)
