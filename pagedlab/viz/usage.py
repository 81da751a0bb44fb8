"""KV-block usage per engine step (lab 00's live view of the pool filling and draining).

Input: the engine's ``step_stats`` (``StepStats`` dataclasses or dicts with ``step``,
``scheduled``, ``kv_blocks_used``, ``kv_blocks_free``, ``running``, ``waiting``). Frame ``k``
shows bars for steps ``0..k`` (blocks in use after each step), the pool as a strip of used and
free blocks at step ``k``, and which requests computed how many tokens in that step.

Hooks: ``svg.pl-kv-usage`` (``data-step``, ``data-used``, ``data-free``), ``rect.pl-bar``
(``data-step``, ``data-used``), ``rect.pl-strip-cell`` (``data-used``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagedlab.viz._svg import COLORS, as_dict, attrs, esc, owner_color, svg_doc, text
from pagedlab.viz.queues import _count

_PAD, _WIDTH, _X0 = 16.0, 780.0, 72.0  # margins; bars, strip and chips start at _X0 (px)


def _usage_bars(st: list[dict[str, Any]], cur_i: int, peak: int, y0: float, ch: float) -> list[str]:
    """Blocks in use after each step up to ``cur_i`` (``rect.pl-bar``), the current one highlighted;
    the x range covers all steps so frames line up."""
    n = len(st)
    cw = (_WIDTH - _X0 - _PAD) / max(n, 1)
    ymax = max(peak, 1)
    body = [
        f'<line x1="{_X0:.1f}" y1="{y0 + ch:.1f}" x2="{_WIDTH - _PAD:.1f}" y2="{y0 + ch:.1f}" '
        f'stroke="{COLORS["muted"]}"/>'
    ]
    for frac in (0.5, 1.0):
        yy = y0 + ch - ch * frac
        body.append(
            f'<line x1="{_X0:.1f}" y1="{yy:.1f}" x2="{_WIDTH - _PAD:.1f}" y2="{yy:.1f}" stroke="{COLORS["grid"]}"/>'
        )
        body.append(text(_X0 - 6, yy, round(ymax * frac), size=9, anchor="end", color=COLORS["muted"]))
    body.append(text(_PAD, y0 + ch / 2, "blocks", size=10, color=COLORS["muted"]))
    body.append(text(_PAD, y0 + ch / 2 + 13, "in use", size=10, color=COLORS["muted"]))
    for k, s in enumerate(st[: cur_i + 1]):
        u = int(s["kv_blocks_used"])
        h = ch * u / ymax
        body.append(
            f'<rect {attrs(cls="pl-bar", data_step=s["step"], data_used=u)} x="{_X0 + k * cw + 0.5:.1f}" '
            f'y="{y0 + ch - h:.1f}" width="{max(cw - 1, 1):.1f}" height="{h:.1f}" '
            f'fill="{COLORS["highlight"] if k == cur_i else COLORS["prefill"]}">'
            f"<title>step {s['step']}: {u} blocks</title></rect>"
        )
    body.append(text(_X0, y0 + ch + 11, f"step {st[0]['step'] if n else 0}", size=9, color=COLORS["muted"]))
    body.append(
        text(
            _WIDTH - _PAD,
            y0 + ch + 11,
            f"step {st[-1]['step'] if n else 0}",
            size=9,
            anchor="end",
            color=COLORS["muted"],
        )
    )
    return body


def _pool_strip(num_gpu_blocks: int, used: int, y: float) -> list[str]:
    """The pool at the current step: one ``rect.pl-strip-cell`` per block, the first ``used`` filled."""
    body = [text(_PAD, y + 7, "pool", size=10, color=COLORS["muted"])]
    sw = (_WIDTH - _X0 - _PAD) / max(num_gpu_blocks, 1)
    for b in range(num_gpu_blocks):
        u = b < used
        body.append(
            f'<rect {attrs(cls="pl-strip-cell", data_used=u)} x="{_X0 + b * sw:.1f}" y="{y:.1f}" '
            f'width="{max(sw - 1, 0.8):.1f}" height="14" '
            f'fill="{COLORS["prefill"] if u else COLORS["empty"]}"/>'
        )
    return body


def _batch_chips(scheduled: Sequence[Any], y: float) -> list[str]:
    """Who ran in the current step, one chip per request (``…`` when the row is full)."""
    body = [text(_PAD, y + 7, "batch", size=10, color=COLORS["muted"])]
    cx = _X0
    for rid, ntok, _ in scheduled:
        # by token count: one token is a decode step (robust to how is_prefill was recorded)
        label = f"{rid}: {'prefill ' + str(ntok) if ntok > 1 else 'decode'}"
        w = 12 + len(label) * 6.0
        if cx + w > _WIDTH - _PAD:
            body.append(text(cx, y + 7, "…", size=11))
            break
        body.append(
            f'<rect class="pl-chip" data-req="{esc(rid)}" x="{cx:.1f}" y="{y - 2:.1f}" width="{w:.1f}" '
            f'height="18" rx="9" fill="{owner_color(rid)}"/>'
        )
        body.append(text(cx + w / 2, y + 7, label, size=10, anchor="middle", color="#ffffff"))
        cx += w + 5
    return body


def _after_the_step(cur: dict[str, Any]) -> str:
    """``", 3 still running, 1 waiting"``: the queues once the step is done (``step_stats`` records them after
    the step, so a request that finished in it is in the batch but no longer running), or ``""``."""
    parts = [
        f"{_count(cur[q])} {word}" for q, word in (("running", "still running"), ("waiting", "waiting")) if cur.get(q)
    ]
    return "".join(", " + p for p in parts)


def render_kv_usage(
    step_stats: Sequence[Any], upto: int | None = None, *, num_gpu_blocks: int | None = None, title: str | None = None
) -> str:
    """Draw KV-block usage over steps ``0..upto``.

    Args:
        step_stats: ``LLMEngine.step_stats`` (or equivalent dicts).
        upto: index of the current step (default: the last).
        num_gpu_blocks: pool size (default ``kv_blocks_used + kv_blocks_free`` of the first step).

    Returns:
        ``<svg class="pl-viz pl-kv-usage" data-step=...>``.
    """
    st = [as_dict(s) for s in step_stats]
    n = len(st)
    cur_i = n - 1 if upto is None else max(0, min(int(upto), n - 1))
    if num_gpu_blocks is None:
        num_gpu_blocks = (int(st[0]["kv_blocks_used"]) + int(st[0]["kv_blocks_free"])) if n else 1
    cur: dict[str, Any] = (
        st[cur_i] if n else {"step": 0, "kv_blocks_used": 0, "kv_blocks_free": num_gpu_blocks, "scheduled": []}
    )
    used = int(cur["kv_blocks_used"])
    peak = max([int(s["kv_blocks_used"]) for s in st] + [1])
    y0, ch = 50.0, 150.0
    body = _usage_bars(st, cur_i, peak, y0, ch)
    body += _pool_strip(num_gpu_blocks, used, y0 + ch + 30)
    body += _batch_chips(cur.get("scheduled", ()), y0 + ch + 60)
    heading = title or "KV-cache blocks in use, step by step"
    summary = (
        f"after step {cur['step']}: {used} of {num_gpu_blocks} blocks in use "
        f"({100 * used / max(num_gpu_blocks, 1):.0f}%); {len(cur.get('scheduled', ()))} requests in its batch"
        + _after_the_step(cur)
        + f"  ·  peak {peak}"
    )
    head = [
        text(_PAD, 16, heading, size=14, weight="bold", cls="pl-title"),
        text(_PAD, 33, summary, size=11, color=COLORS["muted"], cls="pl-summary"),
    ]
    return svg_doc(
        _WIDTH,
        y0 + ch + 90,
        head + body,
        cls="pl-kv-usage",
        title=heading,
        data_step=cur["step"],
        data_used=used,
        data_free=num_gpu_blocks - used,
    )
