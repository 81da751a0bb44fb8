"""Batch composition per step: a Gantt chart of prefill chunks and decodes.

Rows are requests, columns are engine steps; a cell says what a request did in that step:
a *prefill* chunk (blue, its token count written in it) or one *decode* token (green). A red
cross marks a preemption. Under the chart, a bar per step shows the tokens the step computed
against the ``max_num_batched_tokens`` budget. Frame ``k`` draws steps ``0..k``, so playing the
frames shows iteration-level scheduling happen.

Inputs are normalised by :func:`batch_steps` from either the engine's ``step_stats``
(``StepStats`` dataclasses or dicts) or a tracer's events (``schedule``/``preempt``/``finish``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pagedlab.viz._svg import COLORS, as_dict, attrs, esc, legend, owner_color, svg_doc, text, text_width


def _is_events(items: Sequence[Any]) -> bool:
    return bool(items) and isinstance(items[0], dict) and "kind" in items[0]


def _req_key(rid: str) -> tuple[int, int, int, str]:
    """Row order only (numeric ids, a fork child ``"3#1"`` right after ``"3"``): display-only, the
    chart has ids from ``step_stats`` or trace events, not the engine's fork groups (see ``owner_color``)."""
    base, _, sub = str(rid).partition("#")
    return (0, int(base), int(sub) if sub.isdigit() else 0, "") if base.isdigit() else (1, 0, 0, str(rid))


def empty_step(step: int) -> dict[str, Any]:
    """One step of :func:`batch_steps` output with nothing in it.

    Args:
        step: the step number.

    Returns:
        ``{"step": step, "scheduled": [], "preempted": [], "finished": []}`` with the counts
        (``running``, ``waiting``, ``swapped``, ``kv_blocks_used``, ``kv_blocks_free``) ``None``;
        a fresh dict (fresh lists) on every call, so callers may fill it in.
    """
    return {
        "step": step,
        "scheduled": [],
        "preempted": [],
        "finished": [],
        "running": None,
        "waiting": None,
        "swapped": None,
        "kv_blocks_used": None,
        "kv_blocks_free": None,
    }


def batch_steps(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Normalise ``step_stats`` or tracer events to a list of per-step dicts.

    Returns:
        ``[{"step", "scheduled": [(req_id, num_tokens, is_prefill)], "preempted": [...],
        "finished": [...], "running", "waiting", "swapped", "kv_blocks_used", "kv_blocks_free"}]``
        (counts are ``None`` when the input does not have them), ordered by step.
    """
    if not items:
        return []
    if _is_events(items):
        steps: OrderedDict[int, dict[str, Any]] = OrderedDict()
        for ev in items:
            kind = ev.get("kind")
            if kind not in ("schedule", "preempt", "finish"):
                continue
            st = steps.setdefault(int(ev["step"]), empty_step(int(ev["step"])))
            rid = str(ev.get("req", ev.get("request_id")))
            if kind == "schedule":
                st["scheduled"].append((rid, int(ev["num_tokens"]), bool(ev.get("prefill"))))
            elif kind == "preempt":
                st["preempted"].append(rid)
            else:
                st["finished"].append(rid)
        return [steps[k] for k in sorted(steps)]
    out: list[dict[str, Any]] = []
    for s in items:
        d = as_dict(s)
        out.append(
            {
                "step": int(d.get("step", len(out))),
                "scheduled": [(str(r), int(n), bool(p)) for r, n, p in d.get("scheduled", ())],
                "preempted": [str(r) for r in d.get("preempted", ())],
                "finished": list(d.get("finished", ())),
                "running": d.get("running"),
                "waiting": d.get("waiting"),
                "swapped": d.get("swapped"),
                "kv_blocks_used": d.get("kv_blocks_used"),
                "kv_blocks_free": d.get("kv_blocks_free"),
            }
        )
    return out


@dataclass(frozen=True)
class _GanttLayout:
    """Geometry (px): ``cw`` per step column, ``rh`` per request row, chart from ``(x0, top)``."""

    n: int  # steps
    rows: int  # requests
    pad: float = 16.0
    label_w: float = 54.0
    top: float = 46.0
    bar_h: float = 70.0  # the tokens-per-step bars
    min_width: float = 640.0  # at least the title's width

    @property
    def cw(self) -> float:
        return max(3.0, min(26.0, 760.0 / max(self.n, 1)))

    @property
    def rh(self) -> float:
        return max(7.0, min(18.0, 320.0 / max(self.rows, 1)))

    @property
    def x0(self) -> float:
        return self.pad + self.label_w

    @property
    def width(self) -> float:
        return max(640.0, self.min_width, self.x0 + self.n * self.cw + self.pad)

    @property
    def chart_h(self) -> float:
        return self.rows * self.rh


def _gantt_rows(lay: _GanttLayout, row_of: dict[str, int]) -> list[str]:
    """Zebra stripes, request labels and owner colour marks, one per request row."""
    body: list[str] = []
    x0, rh, n, cw = lay.x0, lay.rh, lay.n, lay.cw
    for r, i in row_of.items():
        y = lay.top + i * rh
        if i % 2 == 0:
            body.append(
                f'<rect x="{x0:.1f}" y="{y:.1f}" width="{n * cw:.1f}" height="{rh:.1f}" '
                f'fill="{COLORS["grid"]}" opacity="0.45"/>'
            )
        if rh >= 9:
            body.append(text(x0 - 6, y + rh / 2, f"req {r}", size=min(11, int(rh * 0.75)), anchor="end"))
        body.append(
            f'<rect x="{lay.pad:.1f}" y="{y + rh * 0.2:.1f}" width="5" height="{rh * 0.6:.1f}" '
            f'fill="{owner_color(r)}"/>'
        )
    return body


def _gantt_step(lay: _GanttLayout, k: int, s: dict[str, Any], row_of: dict[str, int]) -> list[str]:
    """Column ``k``: a ``rect.pl-cell`` per scheduled request, a ``g.pl-preempt`` cross per preemption."""
    body: list[str] = []
    cw, rh = lay.cw, lay.rh
    x = lay.x0 + k * cw
    for rid, nt, is_pre in s["scheduled"]:
        y = lay.top + row_of[rid] * rh
        kind = "prefill" if is_pre else "decode"
        fill = COLORS["prefill"] if is_pre else COLORS["decode"]
        inset = 0.5 if is_pre else rh * 0.22
        hooks = attrs(cls="pl-cell", data_step=s["step"], data_req=rid, data_kind=kind, data_tokens=nt)
        body.append(
            f'<rect {hooks} x="{x + 0.5:.1f}" y="{y + inset:.1f}" width="{max(cw - 1, 1.5):.1f}" '
            f'height="{rh - 2 * inset:.1f}" rx="1.5" fill="{fill}"><title>step {s["step"]}: req {esc(rid)} '
            f"{kind} {nt} token(s)</title></rect>"
        )
        if is_pre and cw >= 18 and rh >= 11:
            body.append(text(x + cw / 2, y + rh / 2, nt, size=8, color="#ffffff", anchor="middle"))
    for rid in s["preempted"]:
        if rid in row_of:
            y = lay.top + row_of[rid] * rh
            stroke = f'stroke="{COLORS["preempt"]}" stroke-width="2"'
            x1, x2, y1, y2 = f"{x + 1:.1f}", f"{x + cw - 1:.1f}", f"{y + 1:.1f}", f"{y + rh - 1:.1f}"
            body.append(
                f'<g class="pl-preempt" data-req="{esc(rid)}" data-step="{s["step"]}">'
                f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" {stroke}/>'
                f'<line x1="{x2}" y1="{y1}" x2="{x1}" y2="{y2}" {stroke}/></g>'
            )
    return body


def _token_bars(
    lay: _GanttLayout,
    st: list[dict[str, Any]],
    tokens_per_step: list[tuple[int, int]],
    last: int,
    max_num_batched_tokens: int | None,
    token_scale: int | None = None,
) -> tuple[list[str], float]:
    """Tokens per step (prefill over decode) against the budget; returns the parts and the y below them.
    The bars' full height is ``token_scale`` tokens, at least this chart's own peak (and budget)."""
    x0, cw, n, bar_h = lay.x0, lay.cw, lay.n, lay.bar_h
    y_bar = lay.top + lay.chart_h + 14
    peak = max([a + b for a, b in tokens_per_step] + [max_num_batched_tokens or 0, token_scale or 0, 1])
    body = [
        text(x0 - 6, y_bar + bar_h / 2, "tokens", size=10, anchor="end", color=COLORS["muted"]),
        f'<line x1="{x0:.1f}" y1="{y_bar + bar_h:.1f}" x2="{x0 + n * cw:.1f}" y2="{y_bar + bar_h:.1f}" '
        f'stroke="{COLORS["muted"]}" stroke-width="1"/>',
    ]
    for k, (pre, dec) in enumerate(tokens_per_step[: last + 1]):
        x = x0 + k * cw
        hp, hd = bar_h * pre / peak, bar_h * dec / peak
        hooks = attrs(cls="pl-tokens", data_step=st[k]["step"], data_prefill=pre, data_decode=dec)
        body.append(
            f'<rect {hooks} x="{x + 0.5:.1f}" y="{y_bar + bar_h - hd:.1f}" width="{max(cw - 1, 1.5):.1f}" '
            f'height="{hd:.1f}" fill="{COLORS["decode"]}"/>'
        )
        if hp:
            body.append(
                f'<rect x="{x + 0.5:.1f}" y="{y_bar + bar_h - hd - hp:.1f}" width="{max(cw - 1, 1.5):.1f}" '
                f'height="{hp:.1f}" fill="{COLORS["prefill"]}"/>'
            )
    if max_num_batched_tokens:
        yb = y_bar + bar_h - bar_h * max_num_batched_tokens / peak
        body.append(
            f'<line class="pl-budget" x1="{x0:.1f}" y1="{yb:.1f}" x2="{x0 + n * cw:.1f}" y2="{yb:.1f}" '
            f'stroke="{COLORS["preempt"]}" stroke-dasharray="5 3" stroke-width="1.2"/>'
        )
        body.append(
            text(
                x0 + n * cw - 2,
                yb - 7,
                f"budget {max_num_batched_tokens}",
                size=9,
                anchor="end",
                color=COLORS["preempt"],
            )
        )
    return body, y_bar + bar_h + 8


def _step_ticks_and_legend(lay: _GanttLayout, st: list[dict[str, Any]], y: float) -> tuple[list[str], float]:
    """Step numbers under the bars, then the legend; returns the parts and the bottom y."""
    cw = lay.cw
    tick_every = max(1, int(40 // cw) if cw < 40 else 1)
    body = [
        text(lay.x0 + k * cw + cw / 2, y + 5, st[k]["step"], size=9, anchor="middle", color=COLORS["muted"])
        for k in range(0, lay.n, tick_every)
    ]
    y += 16
    items: list[tuple[str, str, str, str | None]] = [
        ("prefill chunk", COLORS["prefill"], "#ffffff", None),
        ("decode", COLORS["decode"], "#ffffff", None),
        ("preempted", "#ffffff", COLORS["preempt"], None),
        ("current step", "#ffffff", COLORS["highlight"], None),
    ]
    lg, h = legend(lay.pad, y, items, lay.width - 2 * lay.pad)
    return body + lg, y + h + 6


def _gantt_summary(cur: dict[str, Any] | None, tokens: tuple[int, int]) -> str:
    if cur is None:
        return "no step yet"
    pre, dec = tokens
    return f"step {cur['step']}: {len(cur['scheduled'])} requests, {pre} prefill + {dec} decode tokens" + (
        f", preempted {', '.join(cur['preempted'])}" if cur["preempted"] else ""
    )


def _divergence_mark(
    lay: _GanttLayout, st: list[dict[str, Any]], row_of: dict[str, int], step: int, request: str | None
) -> list[str]:
    """A red dashed outline over step ``step``'s column (or its cell in ``request``'s row)."""
    k = next((i for i, s in enumerate(st) if s["step"] == step), None)
    if k is None:
        return []
    x = lay.x0 + k * lay.cw
    y, h = lay.top - 5, lay.chart_h + 10
    if request is not None and str(request) in row_of:
        y, h = lay.top + row_of[str(request)] * lay.rh - 2, lay.rh + 4
    hooks = attrs(cls="pl-divergence", data_step=step, data_req=request)
    return [
        f'<rect {hooks} x="{x - 1.5:.1f}" y="{y:.1f}" width="{lay.cw + 3:.1f}" height="{h:.1f}" fill="none" '
        f'stroke="{COLORS["preempt"]}" stroke-width="2.5" stroke-dasharray="4 2"><title>first divergence: step '
        f"{step}{'' if request is None else ', request ' + esc(request)}</title></rect>"
    ]


def render_batch_gantt(
    steps: Sequence[Any],
    upto: int | None = None,
    *,
    max_num_batched_tokens: int | None = None,
    title: str | None = None,
    mark_step: int | None = None,
    mark_request: str | None = None,
    token_scale: int | None = None,
) -> str:
    """Draw which requests ran in which step, and how (prefill chunk or decode).

    Args:
        steps: ``step_stats``, tracer events, or :func:`batch_steps` output.
        upto: index of the last step drawn (default: all); the chart keeps its full width so
            frames line up.
        max_num_batched_tokens: draw the per-step token budget as a dashed line.
        title: heading.
        mark_step: the step number (``steps[k]["step"]``) to outline in red as a ``rect.pl-divergence``
            (e.g. where two engines' traces first differ); ``mark_request`` narrows the mark to that
            request's row when the request is in the chart. Nothing is drawn for a step not in ``steps``.
        token_scale: tokens the per-step bars' full height stands for (default: this chart's own peak,
            or the budget if higher); charts drawn to be compared pass one value (``side_by_side``).

    Returns:
        ``<svg class="pl-viz pl-gantt" data-step=...>`` with one ``rect.pl-cell`` per
        (request, step) scheduled up to ``upto`` (``data-kind`` = ``prefill`` | ``decode``).
    """
    st = batch_steps(steps)
    n = len(st)
    last = n - 1 if upto is None else max(-1, min(int(upto), n - 1))
    reqs = sorted(dict.fromkeys(rid for s in st for rid, _, _ in s["scheduled"]), key=_req_key)
    row_of = {r: i for i, r in enumerate(reqs)}
    heading = title or "Batch composition per step"
    # the labels column holds the longest "req <id>" right of the owner mark (x0 - 6 is its right end)
    label_w = max([54.0] + [5 + 4 + text_width(f"req {r}", 11) + 6 for r in reqs])
    lay = _GanttLayout(n, len(reqs), label_w=label_w, min_width=2 * 16.0 + text_width(heading, 14, bold=True))
    body = _gantt_rows(lay, row_of)
    tokens_per_step = [
        (sum(nt for _, nt, p in s["scheduled"] if p), sum(nt for _, nt, p in s["scheduled"] if not p)) for s in st
    ]
    for k, s in enumerate(st[: last + 1]):
        body += _gantt_step(lay, k, s, row_of)
    if 0 <= last < n:  # cursor on the current step
        body.append(
            f'<rect class="pl-cursor" x="{lay.x0 + last * lay.cw:.1f}" y="{lay.top - 3:.1f}" '
            f'width="{lay.cw:.1f}" height="{lay.chart_h + 6:.1f}" fill="none" stroke="{COLORS["highlight"]}" '
            f'stroke-width="2"/>'
        )
    if mark_step is not None:
        body += _divergence_mark(lay, st, row_of, mark_step, mark_request)
    bars, y = _token_bars(lay, st, tokens_per_step, last, max_num_batched_tokens, token_scale)
    ticks, y = _step_ticks_and_legend(lay, st, y)
    cur = st[last] if 0 <= last < n else None
    head = [
        text(lay.pad, 16, heading, size=14, weight="bold", cls="pl-title"),
        text(
            lay.pad,
            33,
            _gantt_summary(cur, tokens_per_step[last] if cur is not None else (0, 0)),
            size=11,
            color=COLORS["muted"],
            cls="pl-summary",
        ),
    ]
    return svg_doc(
        lay.width,
        y,
        head + body + bars + ticks,
        cls="pl-gantt",
        title=heading,
        data_step=cur["step"] if cur is not None else -1,
        data_num_requests=len(reqs),
    )
