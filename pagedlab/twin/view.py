"""Two engines' traces of one workload, side by side in a lab's widget, their first divergence marked.

The twin runner (``pagedlab.twin``) plays a workload on the kit and on real vLLM and returns two
``pagedlab.twin.records.Trace`` objects; :func:`render_twin` draws both with :func:`render_batch_gantt`
(the charts labs 04 and 05 replay their runs in), on the same step columns, and outlines the first
divergence (``pagedlab.twin.records.diff``) in red in both charts (``rect.pl-divergence``, with
``data-step`` and ``data-req``). Under the charts a table gives each request's tokens and finish
reasons on both sides, the differing row marked. :func:`twin_player` is the same as a frame player.

Labs 02 and 07 draw the pool instead (``widget="pool"`` / ``"prefix"``, :func:`render_twin_pools`): the
two engines' block pools at one step side by side, rebuilt from the traces' block tables, free queues
and hashed blocks (``StepRecord.block_ids`` ...), each block that differs outlined in red in both
(``rect.pl-divergence`` with ``data-block-id``).
"""

from __future__ import annotations

from typing import Any

from pagedlab.twin.records import Divergence, Trace, diff, first_block_id_difference
from pagedlab.viz._svg import COLORS, esc
from pagedlab.viz.gantt import empty_step, render_batch_gantt
from pagedlab.viz.pool import render_block_pool, render_pool_and_queue

__all__ = [
    "WIDGETS",
    "pool_differences",
    "pool_snapshot",
    "render_twin",
    "render_twin_pools",
    "trace_steps",
    "twin_player",
    "twin_summary",
]

#: The widgets :func:`render_twin` draws two traces in: the batch Gantt (labs 04-06, 09), the block pool
#: and free queue (lab 02's ``render_pool_and_queue``), the block pool with its prefix-cache hits (lab 07).
WIDGETS = ("gantt", "pool", "prefix")


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


def _step_record(trace: Trace, step: int) -> Any:
    return next((r for r in trace.steps if r.step == step), None)


def pool_snapshot(trace: Trace, step: int) -> dict[str, Any]:
    """The pool of ``trace`` as step ``step``'s ``schedule()`` left it, in the ``pagedlab.trace`` snapshot
    format :func:`pagedlab.viz.render_block_pool` draws (owners and ``ref_cnt`` from the block tables).

    Raises:
        ValueError: the trace has no such step, or did not record its pool (``StepRecord.block_ids``).
    """
    rec = _step_record(trace, step)
    if rec is None or rec.block_ids is None or rec.free_queue is None:
        raise ValueError(f"{trace.engine}'s trace of {trace.workload!r} has no pool recorded at step {step}")
    if trace.num_free_blocks is None:
        raise ValueError(f"{trace.engine}'s trace of {trace.workload!r} lacks num_free_blocks (the pool size)")
    owners: dict[int, list[str]] = {}
    for rid, ids in rec.block_ids.items():
        for b in dict.fromkeys(ids):
            owners.setdefault(int(b), []).append(str(rid))
    hashed = set(rec.hashed_blocks or ())
    blocks = [
        {
            "block_id": b,
            "ref_cnt": len(owners.get(b, [])),
            "owners": sorted(owners.get(b, [])),
            "hashed": b in hashed,
            "free": b not in owners,
        }
        for b in range(int(trace.num_free_blocks))
    ]
    return {
        "step": step,
        "num_gpu_blocks": len(blocks),
        "num_free_blocks": rec.num_free_blocks,
        "free_queue": list(rec.free_queue),
        "blocks": blocks,
        "hits": dict(rec.hit_block_ids or {}),
    }


def pool_differences(left: dict[str, Any], right: dict[str, Any], *, queue_order: bool = True) -> list[int]:
    """Block ids whose owners, hash or (``queue_order``) place in the free queue differ between two
    :func:`pool_snapshot`."""
    n = max(len(left["blocks"]), len(right["blocks"]))
    lq, rq = left["free_queue"], right["free_queue"]

    def state(snap: dict[str, Any], q: list[int], b: int) -> tuple[Any, ...]:
        blk = snap["blocks"][b] if b < len(snap["blocks"]) else None
        place = (q.index(b) if queue_order else True) if b in q else None
        return (None,) if blk is None else (tuple(blk["owners"]), blk["hashed"], place)

    return [b for b in range(n) if state(left, lq, b) != state(right, rq, b)]


def _pool_step(left: Trace, right: Trace, found: Divergence | None, widget: str) -> int:
    """The step the pool widgets open on: the divergence, else the first block-id difference, else
    (prefix) the first hit, else the fullest pool."""
    steps = [r for r in left.steps if r.block_ids is not None]
    if not steps:
        raise ValueError(f"{left.engine}'s trace of {left.workload!r} recorded no pool (StepRecord.block_ids)")
    if found is not None and found.step is not None and _step_record(left, found.step) is not None:
        return found.step
    ids = first_block_id_difference(left, right)
    if ids is not None and ids.step is not None:
        return ids.step
    if widget == "prefix":
        hit = next((r.step for r in steps if any((r.hit_block_ids or {}).values())), None)
        if hit is not None:
            return hit
    return min(steps, key=lambda r: (r.num_free_blocks, r.step)).step


def render_twin_pools(left: Trace, right: Trace, step: int, *, widget: str = "pool") -> str:
    """Both engines' pools at ``step``, side by side, the blocks that differ outlined in red in both.

    ``widget="pool"``: lab 02's block pool and free queue; ``"prefix"``: lab 07's block pool (hashed blocks
    dashed when free) with the step's prefix hits underlined and listed.
    """
    snaps = [pool_snapshot(t, step) for t in (left, right)]
    differ = pool_differences(*snaps, queue_order=widget == "pool")
    cells = []
    for t, snap in zip((left, right), snaps):
        title = f"{t.engine}: block pool after step {step}'s schedule ({snap['num_free_blocks']} free)"
        hit_ids = sorted({b for ids in snap["hits"].values() for b in ids})
        if widget == "pool":
            body = render_pool_and_queue(snap, title=title, mark=differ, highlight=[])
        else:
            hits = "  ·  ".join(f"{esc(r)} ← blocks {ids}" for r, ids in snap["hits"].items() if ids)
            body = render_block_pool(snap, title=title, mark=differ, highlight=hit_ids) + (
                f'<div class="pl-twin-hits" style="font-family:sans-serif;font-size:12px;margin:4px 16px">'
                f"prefix hits this step: {hits or '(none)'}</div>"
            )
        cells.append(
            f'<div class="pl-twin-pool" data-engine="{esc(t.engine)}" data-hits="{esc(hit_ids)}" '
            f'style="flex:1 1 0;min-width:0;overflow-x:auto">{body}</div>'
        )
    return (
        f'<div class="pl-twin-pools" data-step="{step}" data-differing-blocks="{" ".join(map(str, differ))}" '
        f'style="display:flex;gap:12px">{"".join(cells)}</div>'
    )


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
    widget: str = "gantt",
    step: int | None = None,
) -> str:
    """Both traces in one widget (:data:`WIDGETS`), the first divergence outlined in both.

    Args:
        left, right: two traces of one workload (the kit's and vLLM's).
        divergence: their first difference; default ``diff(left, right)``.
        upto: index of the last step column drawn (default: all), as in :func:`render_batch_gantt`.
        widget: ``"gantt"``: the two batch Gantts, one above the other; ``"pool"`` / ``"prefix"``: the two
            pools side by side at one step (:func:`render_twin_pools`).
        step: the step the pool widgets show (default: the divergence's, else for ``"prefix"`` the first
            prefix hit, else the step with the fewest free blocks).
        max_num_batched_tokens: the budget line in both charts.
        title: a heading before the charts.

    Returns:
        ``<div class="pl-twin" data-divergence-step=... data-divergence-req=...>`` (``-1`` / empty
        when the traces agree or differ only after the run) with two ``svg.pl-gantt`` and a table.

    Raises:
        ValueError: the traces are of different workloads, an unknown widget, or (pool widgets) traces
            without recorded pools.
    """
    if left.workload != right.workload:
        raise ValueError(f"traces of different workloads: {left.workload!r} vs {right.workload!r}")
    if widget not in WIDGETS:
        raise ValueError(f"unknown widget {widget!r}; one of {WIDGETS}")
    found = diff(left, right) if divergence is None else divergence
    cols = _columns(left, right)
    at = found.step if found is not None else None
    req = found.request_id if found is not None and at is not None else None
    if widget != "gantt":
        shown = _pool_step(left, right, found, widget) if step is None else step
        charts = [render_twin_pools(left, right, shown, widget=widget)]
        ids = first_block_id_difference(left, right)
        if ids is not None and (found is None or found.field != ids.field or found.step != ids.step):
            charts.insert(
                0,
                f'<div class="pl-twin-ids" data-step="{ids.step}" data-req="{esc(ids.request_id or "")}" '
                f'style="color:{COLORS["preempt"]}">block ids first differ at {esc(str(ids))}</div>',
            )
    else:
        charts = _gantts(left, right, cols, upto, max_num_batched_tokens, at, req)
    color = COLORS["preempt"] if found is not None else COLORS["decode"]
    summary = f'<div class="pl-twin-summary" style="color:{color};font-weight:bold">{esc(twin_summary(left, right, found))}</div>'
    h = f"<h4>{esc(title)}</h4>" if title else ""
    return (
        f'<div class="pl-twin" data-widget="{widget}" data-divergence-step="{-1 if at is None else at}" '
        f'data-divergence-req="{esc(req or "")}" data-divergence-field="{esc(found.field if found else "")}">'
        f"{h}{summary}"
        + "".join(f'<div style="margin:6px 0">{c}</div>' for c in charts)
        + _tokens_table(left, right, found)
        + "</div>"
    )


def _gantts(
    left: Trace,
    right: Trace,
    cols: list[int],
    upto: int | None,
    max_num_batched_tokens: int | None,
    step: int | None,
    req: str | None,
) -> list[str]:
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
    return charts


def twin_player(
    left: Trace,
    right: Trace,
    divergence: Divergence | None = None,
    *,
    max_num_batched_tokens: int | None = None,
    interval: int = 300,
    widget: str = "gantt",
):
    """:func:`render_twin` as a frame player, one frame per step column, opening on the divergence step
    (pool widgets: one frame per step both traces recorded a pool of)."""
    found = diff(left, right) if divergence is None else divergence
    cols = _columns(left, right)
    if widget != "gantt":
        have = {r.step for r in right.steps if r.block_ids is not None}
        cols = [r.step for r in left.steps if r.block_ids is not None and r.step in have]
    if not cols:
        raise ValueError("no steps to show")
    start = cols.index(found.step) if found is not None and found.step in cols else len(cols) - 1
    from pagedlab.viz.player import Player  # lazy: ipywidgets only where a player is built (pagedlab.viz.__getattr__)

    def render(i: int) -> str:
        if widget != "gantt":
            return render_twin(left, right, found, widget=widget, step=cols[i])
        return render_twin(left, right, found, upto=i, max_num_batched_tokens=max_num_batched_tokens)

    return Player(
        list(range(len(cols))),
        render=render,
        caption=lambda i, k: f"step {cols[i]}" + (" (first divergence)" if found and found.step == cols[i] else ""),
        interval=interval,
        description="frame",
        start=start,
    )
