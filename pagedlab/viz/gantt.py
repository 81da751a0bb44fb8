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
from typing import Any, Dict, List, Optional, Sequence

from pagedlab.viz._svg import COLORS, as_dict, attrs, esc, legend, owner_color, svg_doc, text


def _is_events(items: Sequence[Any]) -> bool:
    return bool(items) and isinstance(items[0], dict) and "kind" in items[0]


def _req_key(rid: str):
    base, _, sub = str(rid).partition("#")
    return (0, int(base), int(sub) if sub.isdigit() else 0, "") if base.isdigit() else (1, 0, 0, str(rid))


def batch_steps(items: Sequence[Any]) -> List[Dict[str, Any]]:
    """Normalise ``step_stats`` or tracer events to a list of per-step dicts.

    Returns:
        ``[{"step", "scheduled": [(req_id, num_tokens, is_prefill)], "preempted": [...],
        "finished": [...], "running", "waiting", "swapped", "kv_blocks_used", "kv_blocks_free"}]``
        (counts are ``None`` when the input does not have them), ordered by step.
    """
    if not items:
        return []
    if _is_events(items):
        steps: "OrderedDict[int, Dict[str, Any]]" = OrderedDict()
        for ev in items:
            kind = ev.get("kind")
            if kind not in ("schedule", "preempt", "finish"):
                continue
            st = steps.setdefault(int(ev["step"]), {"step": int(ev["step"]), "scheduled": [], "preempted": [],
                                                    "finished": [], "running": None, "waiting": None,
                                                    "swapped": None, "kv_blocks_used": None,
                                                    "kv_blocks_free": None})
            rid = str(ev.get("req", ev.get("request_id")))
            if kind == "schedule":
                st["scheduled"].append((rid, int(ev["num_tokens"]), bool(ev.get("prefill"))))
            elif kind == "preempt":
                st["preempted"].append(rid)
            else:
                st["finished"].append(rid)
        return [steps[k] for k in sorted(steps)]
    out = []
    for s in items:
        d = as_dict(s)
        out.append({"step": int(d.get("step", len(out))),
                    "scheduled": [(str(r), int(n), bool(p)) for r, n, p in d.get("scheduled", ())],
                    "preempted": [str(r) for r in d.get("preempted", ())], "finished": list(d.get("finished", ())),
                    "running": d.get("running"), "waiting": d.get("waiting"), "swapped": d.get("swapped"),
                    "kv_blocks_used": d.get("kv_blocks_used"), "kv_blocks_free": d.get("kv_blocks_free")})
    return out


def render_batch_gantt(steps: Sequence[Any], upto: Optional[int] = None, *,
                       max_num_batched_tokens: Optional[int] = None, title: Optional[str] = None) -> str:
    """Draw which requests ran in which step, and how (prefill chunk or decode).

    Args:
        steps: ``step_stats``, tracer events, or :func:`batch_steps` output.
        upto: index of the last step drawn (default: all); the chart keeps its full width so
            frames line up.
        max_num_batched_tokens: draw the per-step token budget as a dashed line.
        title: heading.

    Returns:
        ``<svg class="pl-viz pl-gantt" data-step=...>`` with one ``rect.pl-cell`` per
        (request, step) scheduled up to ``upto`` (``data-kind`` = ``prefill`` | ``decode``).
    """
    st = batch_steps(steps)
    n = len(st)
    last = n - 1 if upto is None else max(-1, min(int(upto), n - 1))
    reqs: List[str] = []
    for s in st:
        for rid, _, _ in s["scheduled"]:
            if rid not in reqs:
                reqs.append(rid)
    reqs.sort(key=_req_key)
    row_of = {r: i for i, r in enumerate(reqs)}
    pad, label_w, top = 16.0, 54.0, 46.0
    cw = max(3.0, min(26.0, 760.0 / max(n, 1)))
    rh = max(7.0, min(18.0, 320.0 / max(len(reqs), 1)))
    x0 = pad + label_w
    width = max(640.0, x0 + n * cw + pad)
    chart_h = len(reqs) * rh
    body: List[str] = []
    for r, i in row_of.items():
        y = top + i * rh
        if i % 2 == 0:
            body.append(f'<rect x="{x0:.1f}" y="{y:.1f}" width="{n * cw:.1f}" height="{rh:.1f}" fill="{COLORS["grid"]}" opacity="0.45"/>')
        if rh >= 9:
            body.append(text(x0 - 6, y + rh / 2, f"req {r}", size=min(11, int(rh * 0.75)), anchor="end"))
        body.append(f'<rect x="{pad:.1f}" y="{y + rh * 0.2:.1f}" width="5" height="{rh * 0.6:.1f}" fill="{owner_color(r)}"/>')
    tokens_per_step: List[tuple] = []
    for k, s in enumerate(st):
        pre = sum(nt for _, nt, p in s["scheduled"] if p)
        dec = sum(nt for _, nt, p in s["scheduled"] if not p)
        tokens_per_step.append((pre, dec))
        if k > last:
            continue
        x = x0 + k * cw
        for rid, nt, is_pre in s["scheduled"]:
            y = top + row_of[rid] * rh
            kind = "prefill" if is_pre else "decode"
            fill = COLORS["prefill"] if is_pre else COLORS["decode"]
            inset = 0.5 if is_pre else rh * 0.22
            body.append(f'<rect {attrs(cls="pl-cell", data_step=s["step"], data_req=rid, data_kind=kind, data_tokens=nt)} '
                        f'x="{x + 0.5:.1f}" y="{y + inset:.1f}" width="{max(cw - 1, 1.5):.1f}" '
                        f'height="{rh - 2 * inset:.1f}" rx="1.5" fill="{fill}"><title>step {s["step"]}: req {esc(rid)} '
                        f'{kind} {nt} token(s)</title></rect>')
            if is_pre and cw >= 18 and rh >= 11:
                body.append(text(x + cw / 2, y + rh / 2, nt, size=8, color="#ffffff", anchor="middle"))
        for rid in s["preempted"]:
            if rid in row_of:
                y = top + row_of[rid] * rh
                body.append(f'<g class="pl-preempt" data-req="{esc(rid)}" data-step="{s["step"]}">'
                            f'<line x1="{x + 1:.1f}" y1="{y + 1:.1f}" x2="{x + cw - 1:.1f}" y2="{y + rh - 1:.1f}" stroke="{COLORS["preempt"]}" stroke-width="2"/>'
                            f'<line x1="{x + cw - 1:.1f}" y1="{y + 1:.1f}" x2="{x + 1:.1f}" y2="{y + rh - 1:.1f}" stroke="{COLORS["preempt"]}" stroke-width="2"/></g>')
    if 0 <= last < n:  # cursor on the current step
        body.append(f'<rect class="pl-cursor" x="{x0 + last * cw:.1f}" y="{top - 3:.1f}" width="{cw:.1f}" '
                    f'height="{chart_h + 6:.1f}" fill="none" stroke="{COLORS["highlight"]}" stroke-width="2"/>')
    # tokens per step, against the budget
    y_bar = top + chart_h + 14
    bar_h = 70.0
    peak = max([a + b for a, b in tokens_per_step] + [max_num_batched_tokens or 0, 1])
    body.append(text(x0 - 6, y_bar + bar_h / 2, "tokens", size=10, anchor="end", color=COLORS["muted"]))
    body.append(f'<line x1="{x0:.1f}" y1="{y_bar + bar_h:.1f}" x2="{x0 + n * cw:.1f}" y2="{y_bar + bar_h:.1f}" stroke="{COLORS["muted"]}" stroke-width="1"/>')
    for k, (pre, dec) in enumerate(tokens_per_step):
        if k > last:
            break
        x = x0 + k * cw
        hp, hd = bar_h * pre / peak, bar_h * dec / peak
        body.append(f'<rect {attrs(cls="pl-tokens", data_step=st[k]["step"], data_prefill=pre, data_decode=dec)} '
                    f'x="{x + 0.5:.1f}" y="{y_bar + bar_h - hd:.1f}" width="{max(cw - 1, 1.5):.1f}" height="{hd:.1f}" fill="{COLORS["decode"]}"/>')
        if hp:
            body.append(f'<rect x="{x + 0.5:.1f}" y="{y_bar + bar_h - hd - hp:.1f}" width="{max(cw - 1, 1.5):.1f}" '
                        f'height="{hp:.1f}" fill="{COLORS["prefill"]}"/>')
    if max_num_batched_tokens:
        yb = y_bar + bar_h - bar_h * max_num_batched_tokens / peak
        body.append(f'<line class="pl-budget" x1="{x0:.1f}" y1="{yb:.1f}" x2="{x0 + n * cw:.1f}" y2="{yb:.1f}" '
                    f'stroke="{COLORS["preempt"]}" stroke-dasharray="5 3" stroke-width="1.2"/>')
        body.append(text(x0 + n * cw - 2, yb - 7, f"budget {max_num_batched_tokens}", size=9, anchor="end",
                         color=COLORS["preempt"]))
    y = y_bar + bar_h + 8
    tick_every = max(1, int(40 // cw) if cw < 40 else 1)
    for k in range(0, n, tick_every):
        body.append(text(x0 + k * cw + cw / 2, y + 5, st[k]["step"], size=9, anchor="middle", color=COLORS["muted"]))
    y += 16
    items = [("prefill chunk", COLORS["prefill"], "#ffffff", None), ("decode", COLORS["decode"], "#ffffff", None),
             ("preempted", "#ffffff", COLORS["preempt"], None), ("current step", "#ffffff", COLORS["highlight"], None)]
    lg, h = legend(pad, y, items, width - 2 * pad)
    body.extend(lg)
    y += h + 6
    cur = st[last] if 0 <= last < n else None
    heading = title or "Batch composition per step"
    if cur is not None:
        pre, dec = tokens_per_step[last]
        summary = (f"step {cur['step']}: {len(cur['scheduled'])} requests, {pre} prefill + {dec} decode tokens"
                   + (f", preempted {', '.join(cur['preempted'])}" if cur["preempted"] else ""))
    else:
        summary = "no step yet"
    head = [text(pad, 16, heading, size=14, weight="bold", cls="pl-title"),
            text(pad, 33, summary, size=11, color=COLORS["muted"], cls="pl-summary")]
    return svg_doc(width, y, head + body, cls="pl-gantt", title=heading,
                   data_step=cur["step"] if cur is not None else -1, data_num_requests=len(reqs))
