"""Lab 01 helpers: the memory map of contiguous reservations vs paged blocks, over time.

``memory_map_frames`` replays the same traced requests twice, step by step:

* with one contiguous reservation per request, placed first fit (the pre-PagedAttention
  allocator: ``pagedlab.analysis.contiguous.contiguous_replay_steps``, the loop
  ``replay_contiguous`` runs; each step read by ``contiguous_snapshot`` and accounted by
  ``contiguous_accounting``);
* with blocks from the real ``KVCacheManager`` (``pagedlab.analysis.contiguous.paged_replay_steps``,
  the loop ``replay_paged`` runs; each step read by :func:`paged_snapshot` for who holds which
  block, and accounted by ``paged_accounting``).

``render_memory_map`` draws one frame as two bars of the same capacity, token slot for token
slot: what holds KV, what is reserved for later, what is wasted inside reservations or blocks,
what lies in holes too small for the next request, and what is free. A thin strip above each bar
shows which request owns each region (one colour per request, the same on both bars).

Hooks: ``svg.pl-memory-map`` (``data-step``), ``rect.pl-mm-seg`` (``data-side``, ``data-kind``,
``data-tokens``), ``rect.pl-mm-owner`` (``data-side``, ``data-owner``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pagedlab.analysis.contiguous import (
    CATEGORIES,
    contiguous_accounting,
    contiguous_replay_steps,
    contiguous_snapshot,
    paged_accounting,
    paged_replay_steps,
    prepare_trace,
)
from pagedlab.sim.traces import TraceRequest
from pagedlab.viz._svg import COLORS, attrs, owner_color, svg_doc, text

__all__ = [
    "paged_snapshot",
    "memory_map_frames",
    "render_memory_map",
    "KIND_COLORS",
    "POLICY_NAMES",
    "reservation_bound",
]

#: One colour per slot category (the same as the exercise's failure picture).
KIND_COLORS = {
    "used": "#4e79a7",
    "reservation": "#a0cbe8",
    "internal": "#f28e2b",
    "external": "#e15759",
    "free": COLORS["empty"],
}
KIND_LABELS = {
    "used": "holds KV",
    "reservation": "reserved for later tokens",
    "internal": "internal waste",
    "external": "external fragmentation",
    "free": "free",
}
POLICY_NAMES = {
    "max": "max-length reservation (Orca Max)",
    "pow2": "power-of-two reservation (Orca Pow2)",
    "oracle": "exact-length reservation (Orca Oracle)",
}


def paged_snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """One step of the paged replay (a state ``paged_replay_steps`` yields): which blocks each running request holds.

    Returns:
        ``{"step", "num_gpu_blocks", "block_size", "requests": [{"id", "block_ids", "num_tokens"}]}``.
    """
    m = state["manager"]
    return {
        "step": state["step"],
        "num_gpu_blocks": m.num_gpu_blocks,
        "block_size": m.block_size,
        "requests": [
            {"id": req.request_id, "block_ids": m.get_block_ids(req.request_id), "num_tokens": req.num_computed_tokens}
            for _, req in state["running"]
        ],
    }


def memory_map_frames(
    requests: Sequence[TraceRequest],
    capacity_tokens: int,
    max_model_len: int,
    block_size: int = 16,
    policy: str = "max",
    every: int = 20,
    max_frames: int = 80,
    step_time: float = 0.05,
) -> list[dict[str, Any]]:
    """Frames for :func:`render_memory_map`: both memories every ``every`` steps until both are done.

    Args:
        requests: traced requests (``pagedlab.sim.traces``; see ``prepare_trace`` for what is dropped or cut).
        capacity_tokens: KV capacity in token slots (the paged pool gets ``capacity // block_size`` blocks).
        max_model_len: longest sequence, and the "max" reservation.
        block_size: tokens per block of the paged side.
        policy: the contiguous side's reservation policy, "max", "pow2" or "oracle".
        every: steps between frames (raised if that would give more than ``max_frames``).
        step_time: seconds per step (maps arrival times to steps).
    """
    reqs = prepare_trace(requests, max_model_len)
    num_blocks = capacity_tokens // block_size
    c_snaps: list[dict[str, Any]] = []
    p_snaps: list[dict[str, Any]] = []
    c_acc: list[dict[str, int]] = []
    p_acc: list[dict[str, int]] = []
    for st in contiguous_replay_steps(reqs, capacity_tokens, max_model_len, policy, step_time):
        c_snaps.append(contiguous_snapshot(st))
        c_acc.append(contiguous_accounting(st))
    # ids r<i> on both sides: request i is drawn in the same colour in both memories
    for state in paged_replay_steps(reqs, num_blocks, block_size, max_model_len, step_time, id_prefix="r"):
        p_snaps.append(paged_snapshot(state))
        p_acc.append(paged_accounting(state))
    horizon = max(len(c_acc), len(p_acc))
    every = max(every, -(-horizon // max_frames))
    steps = list(range(0, horizon, every))
    if steps[-1] != horizon - 1:
        steps.append(horizon - 1)
    frames = []
    for k in steps:
        frames.append(
            {
                "step": k,
                "time": k * step_time,
                "policy": policy,
                "capacity": capacity_tokens,
                "block_size": block_size,
                "num_requests": len(reqs),
                "contiguous": c_snaps[k] if k < len(c_snaps) else None,
                "contiguous_acc": c_acc[k] if k < len(c_acc) else None,
                "paged": p_snaps[k] if k < len(p_snaps) else None,
                "paged_acc": p_acc[k] if k < len(p_acc) else None,
                "contiguous_done_at": len(c_acc),
                "paged_done_at": len(p_acc),
            }
        )
    return frames


# --- drawing ------------------------------------------------------------------------------------
Run = tuple[int, int, str, str | None]  # (start slot, slots, kind, owner)


def _contiguous_runs(snap: dict[str, Any]) -> list[Run]:
    runs: list[Run] = []
    need, pos = int(snap["next_request_size"]), 0
    for r in sorted(snap["requests"], key=lambda r: r["start"]):
        if r["start"] > pos:
            hole = r["start"] - pos
            runs.append((pos, hole, "external" if hole < need else "free", None))
        s, cur, final, size = r["start"], r["num_tokens"], r["final_len"], r["reserved"]
        runs += [
            (s, cur, "used", r["id"]),
            (s + cur, final - cur, "reservation", r["id"]),
            (s + final, size - final, "internal", r["id"]),
        ]
        pos = s + size
    if snap["capacity"] > pos:
        hole = snap["capacity"] - pos
        runs.append((pos, hole, "external" if hole < need else "free", None))
    return [r for r in runs if r[1] > 0]


def _paged_runs(snap: dict[str, Any]) -> list[Run]:
    bs, n = snap["block_size"], snap["num_gpu_blocks"]
    owner: dict[int, tuple[str, int]] = {}
    for r in snap["requests"]:
        for j, b in enumerate(r["block_ids"]):
            owner[b] = (r["id"], min(bs, r["num_tokens"] - j * bs))
    runs: list[Run] = []
    for b in range(n):
        if b in owner:
            rid, filled = owner[b]
            runs += [(b * bs, filled, "used", rid), (b * bs + filled, bs - filled, "internal", rid)]
        else:
            runs.append((b * bs, bs, "free", None))
    return [r for r in runs if r[1] > 0]


def _merge(runs: list[Run], key: Callable[[str, str | None], Any]) -> list[tuple[int, int, Any]]:
    out: list[list[Any]] = []
    for start, n, kind, own in runs:
        k = key(kind, own)
        if out and out[-1][2] == k and out[-1][0] + out[-1][1] == start:
            out[-1][1] += n
        else:
            out.append([start, n, k])
    return [(r[0], r[1], r[2]) for r in out]


def _bar(side: str, runs: list[Run], capacity: int, x: float, y: float, w: float, h: float) -> list[str]:
    scale = w / capacity
    parts = []
    for start, n, own in _merge(runs, lambda kind, own: own):
        if own is None:
            continue
        parts.append(
            f'<rect {attrs(cls="pl-mm-owner", data_side=side, data_owner=own)} x="{x + start * scale:.2f}" '
            f'y="{y:.1f}" width="{max(n * scale, 0.4):.2f}" height="5" fill="{owner_color(own)}"/>'
        )
    for start, n, kind in _merge(runs, lambda kind, own: kind):
        parts.append(
            f"<rect {attrs(cls='pl-mm-seg', data_side=side, data_kind=kind, data_tokens=n)} "
            f'x="{x + start * scale:.2f}" y="{y + 7:.1f}" width="{max(n * scale, 0.4):.2f}" '
            f'height="{h:.1f}" fill="{KIND_COLORS[kind]}"/>'
        )
    parts.append(
        f'<rect x="{x:.1f}" y="{y + 7:.1f}" width="{w:.1f}" height="{h:.1f}" fill="none" '
        f'stroke="{COLORS["empty_stroke"]}"/>'
    )
    return parts


def _summary(acc: dict[str, int] | None, capacity: int) -> str:
    if acc is None:
        return "all requests finished"
    pct = {c: 100.0 * acc[c] / capacity for c in CATEGORIES}
    return (
        f"holds KV {pct['used']:.0f}%  ·  reserved {pct['reservation']:.0f}%  ·  internal {pct['internal']:.0f}%"
        f"  ·  external {pct['external']:.0f}%  ·  free {pct['free']:.0f}%      "
        f"running {acc['num_running']}  ·  waiting {acc['num_waiting']}"
    )


def render_memory_map(frame: dict[str, Any]) -> str:
    """Draw one frame of :func:`memory_map_frames`: contiguous on top, paged below."""
    cap = int(frame["capacity"])
    width, pad, bar_h = 820.0, 16.0, 40.0
    w = width - 2 * pad
    body: list[str] = []
    y = 44.0
    sides = [
        (
            "contiguous",
            f"Contiguous: one {POLICY_NAMES[frame['policy']]} per request",
            frame["contiguous"],
            frame["contiguous_acc"],
            _contiguous_runs,
            frame["contiguous_done_at"],
        ),
        (
            "paged",
            f"Paged: blocks of {frame['block_size']} tokens allocated as tokens arrive (vLLM)",
            frame["paged"],
            frame["paged_acc"],
            _paged_runs,
            frame["paged_done_at"],
        ),
    ]
    for side, label, snap, acc, runs_of, done_at in sides:
        body.append(text(pad, y, label, size=12, weight="bold"))
        body.append(
            text(pad, y + 16, _summary(acc, cap), size=11, color=COLORS["muted"], cls="pl-mm-summary", data_side=side)
        )
        if snap is None:
            runs: list[Run] = [(0, cap, "free", None)]
            body.append(text(width - pad, y, f"done at step {done_at}", size=11, anchor="end", color=COLORS["muted"]))
        else:
            runs = runs_of(snap)
        body += _bar(side, runs, cap, pad, y + 26, w, bar_h)
        y += 26 + 7 + bar_h + 26
    # legend
    x = pad
    for kind in CATEGORIES:
        body.append(
            f'<rect x="{x:.1f}" y="{y - 6:.1f}" width="14" height="12" fill="{KIND_COLORS[kind]}" '
            f'stroke="{COLORS["empty_stroke"]}"/>'
        )
        body.append(text(x + 19, y, KIND_LABELS[kind], size=11, color=COLORS["muted"]))
        x += 34 + len(KIND_LABELS[kind]) * 6.2
    body.append(
        text(
            pad,
            y + 18,
            "strip above each bar: the request that owns the region (same colour on both bars)",
            size=10,
            color=COLORS["muted"],
        )
    )
    title = (
        f"Step {frame['step']} (t = {frame['time']:.1f} s): {frame['num_requests']} traced requests, "
        f"{cap:,} token slots of KV memory"
    )
    head = [text(pad, 18, title, size=14, weight="bold", cls="pl-title")]
    return svg_doc(width, y + 32, head + body, cls="pl-memory-map", title=title, data_step=frame["step"])


def reservation_bound(requests: Sequence[TraceRequest], capacity_tokens: int, max_model_len: int) -> dict[str, float]:
    """The utilisation bound of max-length reservation, derived from the lengths alone (no replay).

    In the replay's model a request with a ``P``-token prompt and ``O`` outputs runs ``max(1, O)``
    steps and holds ``P + t`` tokens at its step ``t`` (``t = 0 .. O-1``), always inside a
    reservation of ``M = max_model_len`` slots. Averaged over all (request, step) pairs, a running
    request holds ``L = sum O (P + (O - 1) / 2) / sum O`` tokens, so

    * each reservation is filled to ``L / M`` on average (``fill_bound``), and
    * at most ``k = capacity // M`` reservations fit, so at most ``k L / capacity`` of the whole
      memory holds KV (``used_frac_bound``). The replay's ``used_frac`` equals
      ``mean_batch * L / capacity`` exactly, and reaches the bound when all ``k`` seats stay busy.

    Returns:
        ``mean_len`` (L, tokens), ``seats`` (k), ``fill_bound``, ``used_frac_bound`` (fractions).

    Raises:
        ValueError: no request fits ``max_model_len``, or ``capacity_tokens < max_model_len``.
    """
    reqs = prepare_trace(requests, max_model_len)
    if not reqs:
        raise ValueError(f"no request has a prompt shorter than max_model_len={max_model_len}")
    if capacity_tokens < max_model_len:
        raise ValueError(f"capacity {capacity_tokens} holds no {max_model_len}-token reservation")
    steps = [max(1, r.output_len) for r in reqs]
    held = sum(n * r.prompt_len + n * (n - 1) / 2 for r, n in zip(reqs, steps))
    mean_len = held / sum(steps)
    seats = capacity_tokens // max_model_len
    return {
        "mean_len": mean_len,
        "seats": seats,
        "fill_bound": mean_len / max_model_len,
        "used_frac_bound": seats * mean_len / capacity_tokens,
    }
