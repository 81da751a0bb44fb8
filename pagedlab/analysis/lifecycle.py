"""The request life cycle as a state machine, driven by the real scheduler's trace events (lab 06).

A request is WAITING until first scheduled, then RUNNING; under memory pressure the scheduler
preempts it, to PREEMPTED (recompute: blocks freed, back at the head of the waiting queue; vLLM
0.11.0's ``RequestStatus.PREEMPTED``) or to SWAPPED (its blocks copied to CPU memory; vLLM v0 only),
and back to RUNNING when resumed; it ends FINISHED. The events that move it are the scheduler's
``schedule``, ``preempt`` (``mode``), ``swap_in_req`` and ``finish`` (see :mod:`pagedlab.trace`).

* :func:`lifecycle_frames` replays the events: one frame per engine step with every request's
  state and the number of times each transition has fired so far.
* :func:`render_lifecycle` draws a frame: five states, the transitions between them labelled with
  their counts, and each request as a chip in its current state.

Hooks: ``svg.pl-lifecycle`` (``data-step``), ``g.pl-state`` (``data-state``, ``data-count``),
``g.pl-edge`` (``data-src``, ``data-dst``, ``data-fired``), ``g.pl-chip`` (``data-req``, ``data-state``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pagedlab.viz._svg import COLORS, esc, owner_color, svg_doc, text

__all__ = ["STATES", "TRANSITIONS", "lifecycle_frames", "render_lifecycle"]

STATES = ("WAITING", "RUNNING", "PREEMPTED", "SWAPPED", "FINISHED")
#: (source, destination, label): every transition the kit's scheduler can make.
TRANSITIONS = (
    ("WAITING", "RUNNING", "admit"),
    ("RUNNING", "PREEMPTED", "preempt (recompute)"),
    ("PREEMPTED", "RUNNING", "resume: re-prefill"),
    ("RUNNING", "SWAPPED", "preempt (swap)"),
    ("SWAPPED", "RUNNING", "swap in"),
    ("RUNNING", "FINISHED", "finish"),
    ("WAITING", "FINISHED", "abort"),
    ("PREEMPTED", "FINISHED", "abort"),
    ("SWAPPED", "FINISHED", "abort"),
)
_EDGES = {(s, d) for s, d, _ in TRANSITIONS}
_ARROW = (
    '<defs><marker id="pl-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
    'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5c6370"/></marker></defs>'
)
_POS = {
    "WAITING": (90, 80),
    "RUNNING": (330, 80),
    "PREEMPTED": (210, 215),
    "SWAPPED": (450, 215),
    "FINISHED": (570, 80),
}


def _next_state(state: str, event: Mapping[str, Any]) -> str | None:
    """The state ``event`` moves a request in ``state`` to, or None if it does not move it."""
    kind = event["kind"]
    if kind == "schedule" and state in ("WAITING", "PREEMPTED"):
        return "RUNNING"
    if kind == "preempt":
        return "SWAPPED" if event.get("mode") == "swap" else "PREEMPTED"
    if kind == "swap_in_req":
        return "RUNNING"
    if kind == "finish":
        return "FINISHED"
    return None


def lifecycle_frames(events: Iterable[Mapping[str, Any]], request_ids: Iterable[str] = ()) -> list[dict[str, Any]]:
    """One frame per engine step: ``{"step", "states": {req: state}, "fired": {(src, dst): n}, "moves"}``.

    ``states`` holds ``request_ids`` (WAITING until their first event) and every request seen so
    far, in order of first appearance; ``fired`` the
    cumulative count of each transition, ``moves`` the ``(req, src, dst)`` of this step.

    Raises:
        ValueError: an event that would make a transition the scheduler cannot make (a trace bug).
    """
    states: dict[str, str] = dict.fromkeys(request_ids, "WAITING")
    fired = {(s, d): 0 for s, d in _EDGES}
    frames: list[dict[str, Any]] = []
    moves: list[tuple[str, str, str]] = []
    step: int | None = None
    for ev in events:
        req = ev.get("req")
        if req is None or ev["kind"] not in ("schedule", "preempt", "swap_in_req", "finish"):
            continue
        if step is not None and ev["step"] != step:
            frames.append({"step": step, "states": dict(states), "fired": dict(fired), "moves": moves})
            moves = []
        step = ev["step"]
        src = states.get(req, "WAITING")
        dst = _next_state(src, ev)
        if dst is None or dst == src:
            states[req] = src
            continue
        if (src, dst) not in _EDGES:
            raise ValueError(
                f"request {req}: {ev['kind']} event moves {src} -> {dst}, which the scheduler "
                f"cannot do (step {ev['step']})"
            )
        states[req] = dst
        fired[(src, dst)] += 1
        moves.append((req, src, dst))
    if step is not None:
        frames.append({"step": step, "states": dict(states), "fired": dict(fired), "moves": moves})
    return frames


def _clip_to_box(x: float, y: float, ux: float, uy: float) -> tuple[float, float]:
    """The point where the ray from a state's centre along ``(ux, uy)`` leaves its 116 x 52 box."""
    t = min(60 / abs(ux) if ux else 1e9, 28 / abs(uy) if uy else 1e9)
    return x + ux * t, y + uy * t


def _edge(src: str, dst: str, label: str, n: int, bend: float) -> str:
    (x1, y1), (x2, y2) = _POS[src], _POS[dst]
    dx, dy = x2 - x1, y2 - y1
    length = max((dx * dx + dy * dy) ** 0.5, 1.0)
    nx, ny = -dy / length, dx / length  # unit normal: the side the curve bends to
    cx, cy = (x1 + x2) / 2 + nx * bend, (y1 + y2) / 2 + ny * bend
    sx, sy = _clip_to_box(
        x1, y1, (cx - x1) / max(abs(cx - x1) + abs(cy - y1), 1), (cy - y1) / max(abs(cx - x1) + abs(cy - y1), 1)
    )
    ex, ey = _clip_to_box(
        x2, y2, (cx - x2) / max(abs(cx - x2) + abs(cy - y2), 1), (cy - y2) / max(abs(cx - x2) + abs(cy - y2), 1)
    )
    lx, ly = 0.25 * sx + 0.5 * cx + 0.25 * ex, 0.25 * sy + 0.5 * cy + 0.25 * ey  # the curve's midpoint
    color = COLORS["preempt"] if "preempt" in label else COLORS["text"] if n else COLORS["masked"]
    dash = "" if n else ' stroke-dasharray="4 3"'
    return (
        f'<g class="pl-edge" data-src="{src}" data-dst="{dst}" data-fired="{n}">'
        f'<path d="M{sx:.0f},{sy:.0f} Q{cx:.0f},{cy:.0f} {ex:.0f},{ey:.0f}" fill="none" stroke="{color}" '
        f'stroke-width="{2 if n else 1}"{dash} marker-end="url(#pl-arrow)"/>'
        + text(
            lx + nx * 9,
            ly + ny * 9,
            f"{label} ×{n}",
            size=10,
            color=color if n else COLORS["muted"],
            anchor=_anchor(lx, x1, x2),
        )
        + "</g>"
    )


def _anchor(lx: float, x1: float, x2: float) -> str:
    """Labels of the edges below RUNNING read away from its centre line, so neighbours do not overlap."""
    mid = _POS["RUNNING"][0]
    if abs(x1 - x2) > 200 or abs(lx - mid) < 5:
        return "middle"
    return "end" if lx < mid else "start"


def render_lifecycle(frame: Mapping[str, Any], title: str = "") -> str:
    """Draw one :func:`lifecycle_frames` frame as an SVG state diagram."""
    states: Mapping[str, str] = frame["states"]
    fired: Mapping[tuple[str, str], int] = frame["fired"]
    moved = {req for req, _, _ in frame.get("moves", [])}
    body = [_ARROW, text(12, 16, title or f"request life cycle after step {frame['step']}", size=12, weight="bold")]
    bends = {
        ("PREEMPTED", "RUNNING"): 30,
        ("RUNNING", "PREEMPTED"): 30,
        ("SWAPPED", "RUNNING"): 30,
        ("RUNNING", "SWAPPED"): 30,
        ("WAITING", "FINISHED"): -75,
    }
    for src, dst, label in TRANSITIONS:
        if src in ("PREEMPTED", "SWAPPED") and dst == "FINISHED" and not fired[(src, dst)]:
            continue  # aborts from preemption states: drawn only when they happened
        body.append(_edge(src, dst, label, fired[(src, dst)], bends.get((src, dst), 0)))
    for state, (x, y) in _POS.items():
        members = [r for r, s in states.items() if s == state]
        fill = {
            "WAITING": COLORS["waiting"],
            "RUNNING": COLORS["running"],
            "PREEMPTED": COLORS["preempt"],
            "SWAPPED": COLORS["swapped"],
            "FINISHED": COLORS["masked"],
        }[state]
        body.append(
            f'<g class="pl-state" data-state="{state}" data-count="{len(members)}">'
            f'<rect x="{x - 58}" y="{y - 26}" width="116" height="52" rx="10" fill="{fill}" '
            f'fill-opacity="0.25" stroke="{fill}" stroke-width="2"/>'
            + text(x, y - 13, state, size=11, weight="bold", anchor="middle")
        )
        for k, req in enumerate(members[:8]):
            cx, cy = x - 49 + (k % 4) * 25, y + 2 + (k // 4) * 12
            stroke = COLORS["highlight"] if req in moved else "none"
            body.append(
                f'<g class="pl-chip" data-req="{esc(req)}" data-state="{state}">'
                f'<rect x="{cx}" y="{cy}" width="22" height="11" rx="3" fill="{owner_color(req)}" '
                f'stroke="{stroke}" stroke-width="2"/>' + text(cx + 11, cy + 5.5, req, size=8, anchor="middle") + "</g>"
            )
        if len(members) > 8:
            body.append(text(x + 50, y + 20, f"+{len(members) - 8}", size=9, anchor="end"))
        body.append("</g>")
    return svg_doc(660, 280, body, cls="pl-lifecycle", data_step=frame["step"])
