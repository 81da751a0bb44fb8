"""Two engines' traces of one workload, side by side in the batch Gantt, their first divergence marked.

The twin runner (``pagedlab.twin``) plays a workload on the kit and on real vLLM and returns two
``pagedlab.twin.records.Trace`` objects; :func:`render_twin` draws both with :func:`render_batch_gantt`
(the charts labs 04 and 05 replay their runs in), on the same step columns, and outlines the first
divergence (``pagedlab.twin.records.diff``) in red in both charts (``rect.pl-divergence``, with
``data-step`` and ``data-req``). Under the charts a table gives each request's tokens and finish
reasons on both sides, the differing row marked. :func:`twin_player` is the same as a frame player.
"""

from __future__ import annotations

from typing import Any

from pagedlab.twin.records import Divergence, Trace, diff
from pagedlab.viz._svg import COLORS, esc
from pagedlab.viz.gantt import empty_step, render_batch_gantt

__all__ = ["render_twin", "trace_steps", "twin_player", "twin_summary"]


def trace_steps(trace: Trace, step_numbers: list[int] | None = None) -> list[dict[str, Any]]:
    """``trace``'s steps as :func:`pagedlab.viz.batch_steps` dicts, for the Gantt.

    A scheduled entry is drawn as a prefill chunk when it carries more than one token or is the
    request's first since it started or was preempted (a trace records token counts, not phases).

    Args:
        trace: one engine's trace.
        step_numbers: the step columns to draw (default: the trace's own); a step the trace lacks
            is drawn empty, so two traces line up column for column.
    """
    started: set[str] = set()
    by_step: dict[int, dict[str, Any]] = {}
    for rec in trace.steps:
        s = empty_step(rec.step)
        for rid in rec.preempted:
            started.discard(str(rid))
        for rid, n in rec.scheduled:
            rid = str(rid)
            s["scheduled"].append((rid, int(n), int(n) > 1 or rid not in started))
            started.add(rid)
        s["preempted"] = [str(r) for r in rec.preempted]
        s["finished"] = [str(f[0]) for f in rec.finished]
        by_step[rec.step] = s
    numbers = sorted(by_step) if step_numbers is None else step_numbers
    return [by_step.get(k, empty_step(k)) for k in numbers]


def twin_summary(left: Trace, right: Trace, divergence: Divergence | None) -> str:
    """One line: identical, or where and how the traces first differ."""
    if divergence is None:
        return (
            f"{left.engine} and {right.engine} made the same decisions at every one of {len(left.steps)} steps, "
            "and every request's tokens and finish reasons agree"
        )
    return f"first divergence: {divergence}"


def _tokens_table(left: Trace, right: Trace, divergence: Divergence | None) -> str:
    rows = []
    bad = divergence.request_id if divergence is not None else None
    for rid in sorted(set(left.tokens) | set(right.tokens), key=lambda r: (len(str(r)), str(r))):
        a, b = left.tokens.get(rid), right.tokens.get(rid)
        ra, rb = left.finish_reasons.get(rid), right.finish_reasons.get(rid)
        same = a == b and ra == rb
        mark = rid == bad or not same
        style = f' style="background:{COLORS["preempt"]}22"' if mark else ""
        cells = [
            rid,
            sum(len(c) for c in a or []),
            sum(len(c) for c in b or []),
            "yes" if a == b else "no",
            ra,
            rb,
        ]
        tds = "".join(f"<td style='padding:0 8px'>{esc(c)}</td>" for c in cells)
        rows.append(f'<tr class="pl-twin-row" data-req="{esc(rid)}" data-differs="{int(mark)}"{style}>{tds}</tr>')
    head = "".join(
        f"<th style='padding:0 8px'>{esc(h)}</th>"
        for h in (
            "request",
            f"{left.engine} tokens",
            f"{right.engine} tokens",
            "same token ids",
            f"{left.engine} finish",
            f"{right.engine} finish",
        )
    )
    return f'<table class="pl-twin-tokens"><tr>{head}</tr>{"".join(rows)}</table>'


def _columns(left: Trace, right: Trace) -> list[int]:
    return sorted({s.step for s in left.steps} | {s.step for s in right.steps})


def render_twin(
    left: Trace,
    right: Trace,
    divergence: Divergence | None = None,
    *,
    upto: int | None = None,
    max_num_batched_tokens: int | None = None,
    title: str = "",
) -> str:
    """Both traces in the batch Gantt, one above the other, the first divergence outlined in both.

    Args:
        left, right: two traces of one workload (the kit's and vLLM's).
        divergence: their first difference; default ``diff(left, right)``.
        upto: index of the last step column drawn (default: all), as in :func:`render_batch_gantt`.
        max_num_batched_tokens: the budget line in both charts.
        title: a heading before the charts.

    Returns:
        ``<div class="pl-twin" data-divergence-step=... data-divergence-req=...>`` (``-1`` / empty
        when the traces agree or differ only after the run) with two ``svg.pl-gantt`` and a table.

    Raises:
        ValueError: the traces are of different workloads.
    """
    if left.workload != right.workload:
        raise ValueError(f"traces of different workloads: {left.workload!r} vs {right.workload!r}")
    found = diff(left, right) if divergence is None else divergence
    cols = _columns(left, right)
    step = found.step if found is not None else None
    req = found.request_id if found is not None and step is not None else None
    charts = []
    for t in (left, right):
        head = f"{t.engine}: workload {t.workload}"
        charts.append(
            render_batch_gantt(
                trace_steps(t, cols),
                upto,
                max_num_batched_tokens=max_num_batched_tokens,
                title=head,
                mark_step=step,
                mark_request=req,
            )
        )
    color = COLORS["preempt"] if found is not None else COLORS["decode"]
    summary = f'<div class="pl-twin-summary" style="color:{color};font-weight:bold">{esc(twin_summary(left, right, found))}</div>'
    h = f"<h4>{esc(title)}</h4>" if title else ""
    return (
        f'<div class="pl-twin" data-divergence-step="{-1 if step is None else step}" '
        f'data-divergence-req="{esc(req or "")}">{h}{summary}'
        + "".join(f'<div style="margin:6px 0">{c}</div>' for c in charts)
        + _tokens_table(left, right, found)
        + "</div>"
    )


def twin_player(
    left: Trace,
    right: Trace,
    divergence: Divergence | None = None,
    *,
    max_num_batched_tokens: int | None = None,
    interval: int = 300,
):
    """:func:`render_twin` as a frame player, one frame per step column, opening on the divergence step."""
    from pagedlab.viz.player import Player

    found = diff(left, right) if divergence is None else divergence
    cols = _columns(left, right)
    if not cols:
        raise ValueError("no steps to show")
    start = cols.index(found.step) if found is not None and found.step in cols else len(cols) - 1

    def render(i: int) -> str:
        return render_twin(left, right, found, upto=i, max_num_batched_tokens=max_num_batched_tokens)

    return Player(
        list(range(len(cols))),
        render=render,
        caption=lambda i, k: f"step {cols[i]}" + (" (first divergence)" if found and found.step == cols[i] else ""),
        interval=interval,
        description="step",
        start=start,
    )
