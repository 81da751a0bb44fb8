"""Scheduler queues over time: waiting / running / swapped.

Frame ``k`` shows the three queues at step ``k`` (request chips when the history lists request
ids, bars when it only has counts, as the engine's ``step_stats`` do) and their lengths over all
steps up to ``k``. Preemption under memory pressure shows up as requests moving from running to
waiting (recompute) or swapped (swap).

Hooks: ``g.pl-queue`` (``data-queue``, ``data-count``), ``rect.pl-chip`` (``data-req``),
``polyline.pl-series`` (``data-queue``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagedlab.viz._svg import COLORS, as_dict, esc, owner_color, svg_doc, text


def queue_history(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Per-step queue contents from ``step_stats`` (counts only) or dicts that already hold
    ``waiting``/``running``/``swapped`` as lists of request ids or counts."""
    out: list[dict[str, Any]] = []
    for s in items:
        d = as_dict(s)
        out.append(
            {
                "step": int(d.get("step", len(out))),
                "waiting": d.get("waiting") or 0,
                "running": d.get("running") or 0,
                "swapped": d.get("swapped") or 0,
                "preempted": list(d.get("preempted", ()) or ()),
            }
        )
    return out


def _count(v: Any) -> int:
    return len(v) if isinstance(v, (list, tuple)) else int(v or 0)


QUEUES = ("waiting", "running", "swapped")
_LANE_H, _CHIP_W, _PAD, _WIDTH = 26.0, 34.0, 16.0, 760.0
_LX = _PAD + 110  # where lanes and the chart start (right of the labels)


def _queue_lane(q: str, v: Any, hist: list[dict[str, Any]], y: float) -> list[str]:
    """One ``g.pl-queue`` lane at ``y``: a chip per request id (as many as fit), or a bar for a count."""
    cnt = _count(v)
    lx = _LX
    body = [
        f'<g class="pl-queue" data-queue="{q}" data-count="{cnt}">',
        text(_PAD, y + _LANE_H / 2, f"{q} ({cnt})", size=12, weight="bold", color=COLORS[q]),
        f'<rect x="{lx:.1f}" y="{y:.1f}" width="{_WIDTH - lx - _PAD:.1f}" height="{_LANE_H:.1f}" rx="4" '
        f'fill="{COLORS["grid"]}" opacity="0.5"/>',
    ]
    if isinstance(v, (list, tuple)):
        fit = int((_WIDTH - lx - _PAD - 4) // (_CHIP_W + 3))
        for k, rid in enumerate(list(v)[:fit]):
            cx = lx + 3 + k * (_CHIP_W + 3)
            body.append(
                f'<rect class="pl-chip" data-req="{esc(rid)}" x="{cx:.1f}" y="{y + 3:.1f}" '
                f'width="{_CHIP_W}" height="{_LANE_H - 6:.1f}" rx="3" fill="{owner_color(rid)}"/>'
            )
            body.append(text(cx + _CHIP_W / 2, y + _LANE_H / 2, rid, size=10, anchor="middle", color="#ffffff"))
        if len(v) > fit:
            body.append(text(_WIDTH - _PAD - 4, y + _LANE_H / 2, f"+{len(v) - fit}", size=10, anchor="end"))
    else:
        bw = (_WIDTH - lx - _PAD) * min(1.0, cnt / max(1, max((_count(h.get(q)) for h in hist), default=0) or 1))
        body.append(
            f'<rect class="pl-count-bar" x="{lx:.1f}" y="{y + 4:.1f}" width="{bw:.1f}" '
            f'height="{_LANE_H - 8:.1f}" rx="3" fill="{COLORS[q]}"/>'
        )
    body.append("</g>")
    return body


def _length_chart(hist: list[dict[str, Any]], cur_i: int, y: float) -> tuple[list[str], float]:
    """Queue lengths over the steps up to ``cur_i`` (``polyline.pl-series``) with a cursor; returns the
    parts and the y below the chart."""
    n, ch, x0 = len(hist), 110.0, _LX
    cw = (_WIDTH - x0 - _PAD) / max(n - 1, 1)
    peak = max([max(_count(h.get(q)) for q in QUEUES) for h in hist] + [1])
    body = [
        f'<rect x="{x0:.1f}" y="{y:.1f}" width="{_WIDTH - x0 - _PAD:.1f}" height="{ch:.1f}" fill="none" '
        f'stroke="{COLORS["grid"]}"/>',
        text(x0 - 8, y + 6, peak, size=9, anchor="end", color=COLORS["muted"]),
        text(x0 - 8, y + ch - 4, 0, size=9, anchor="end", color=COLORS["muted"]),
        text(_PAD, y + ch / 2, "queue length", size=10, color=COLORS["muted"]),
    ]
    for q in QUEUES:
        pts = " ".join(
            f"{x0 + k * cw:.1f},{y + ch - ch * _count(h.get(q)) / peak:.1f}" for k, h in enumerate(hist[: cur_i + 1])
        )
        body.append(
            f'<polyline class="pl-series" data-queue="{q}" points="{pts}" fill="none" '
            f'stroke="{COLORS[q]}" stroke-width="2"/>'
        )
    if n:
        cx = x0 + cur_i * cw
        body.append(
            f'<line class="pl-cursor" x1="{cx:.1f}" y1="{y:.1f}" x2="{cx:.1f}" y2="{y + ch:.1f}" '
            f'stroke="{COLORS["highlight"]}" stroke-width="2"/>'
        )
    y += ch + 20
    body.append(text(x0, y - 8, f"step {hist[0]['step'] if n else 0}", size=9, color=COLORS["muted"]))
    body.append(
        text(_WIDTH - _PAD, y - 8, f"step {hist[-1]['step'] if n else 0}", size=9, anchor="end", color=COLORS["muted"])
    )
    return body, y


def render_queues(history: Sequence[Any], upto: int | None = None, *, title: str | None = None) -> str:
    """Draw the waiting / running / swapped queues at one step and their lengths over time.

    Args:
        history: per-step dicts (``step`` and ``waiting``/``running``/``swapped`` as lists of
            request ids or as counts), or ``step_stats``.
        upto: index of the current step (default: the last).

    Returns:
        ``<svg class="pl-viz pl-queues" data-step=...>`` with three ``g.pl-queue`` lanes
        (``data-queue``, ``data-count``) holding ``rect.pl-chip`` per listed request, and one
        ``polyline.pl-series`` per queue.
    """
    hist = [as_dict(h) for h in history]
    if hist and not all(k in hist[0] for k in QUEUES):
        hist = queue_history(history)
    n = len(hist)
    cur_i = n - 1 if upto is None else max(0, min(int(upto), n - 1))
    cur: dict[str, Any] = hist[cur_i] if n else {"step": 0, "waiting": 0, "running": 0, "swapped": 0}
    body: list[str] = []
    y = 48.0
    for q in QUEUES:
        body += _queue_lane(q, cur.get(q, 0), hist, y)
        y += _LANE_H + 6
    chart, y = _length_chart(hist, cur_i, y + 10)
    heading = title or "Scheduler queues"
    pre = cur.get("preempted") or []
    summary = (
        f"step {cur['step']}: {_count(cur.get('waiting'))} waiting, {_count(cur.get('running'))} running, "
        f"{_count(cur.get('swapped'))} swapped" + (f"; preempted {', '.join(map(str, pre))}" if pre else "")
    )
    head = [
        text(_PAD, 16, heading, size=14, weight="bold", cls="pl-title"),
        text(_PAD, 33, summary, size=11, color=COLORS["muted"], cls="pl-summary"),
    ]
    return svg_doc(_WIDTH, y, head + body + chart, cls="pl-queues", title=heading, data_step=cur["step"])
