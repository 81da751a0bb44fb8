"""Block-pool grid: one cell per physical KV block, coloured by owner.

Input is a pool snapshot in the ``pagedlab.trace`` format (``rebuild_snapshots`` output, or
``KVCacheManager.snapshot()`` / ``BlockPool.snapshot()``)::

    {"step": 3, "num_gpu_blocks": 16, "num_free_blocks": 9, "free_queue": [...],
     "blocks": [{"block_id": 0, "ref_cnt": 2, "owners": ["0", "0#1"], "hashed": True,
                 "free": False}, ...],
     "cpu_blocks": [{"block_id": 0, "ref_cnt": 1, "owners": ["2"]}, ...],   # optional
     "events": [...], "pending_copies": [[src, dst], ...]}                  # optional

Each block is a ``<rect class="pl-block">`` carrying the CSS hooks ``data-block-id``,
``data-owner`` (owners joined by a space, empty when free), ``data-ref-cnt``, ``data-state``
(``used`` | ``shared`` | ``cached`` | ``empty``) and ``data-cow`` (``src`` | ``dst``) for
copy-on-write pairs, so tests and the browser check can read the picture precisely.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pagedlab.viz._svg import COLORS, attrs, esc, legend, owner_color, svg_doc, text, text_width
from pagedlab.viz.pictures import render_queue_rows


def block_state(block: dict[str, Any]) -> str:
    """``shared`` (ref_cnt > 1), ``used`` (ref_cnt 1), ``cached`` (free but its hash is kept, so a
    later request can still hit it) or ``empty`` (free, nothing cached)."""
    ref = int(block.get("ref_cnt", 0))
    if ref > 1:
        return "shared"
    if ref == 1:
        return "used"
    return "cached" if block.get("hashed") else "empty"


def cow_pairs_of(snapshot: dict[str, Any]) -> list[tuple[int, int]]:
    """Copy-on-write ``(src, dst)`` pairs visible in a snapshot: its ``pending_copies`` and the
    ``cow_copy`` events of its step (``events``) or the event just applied (``event``)."""
    pairs: list[tuple[int, int]] = [(int(p[0]), int(p[1])) for p in snapshot.get("pending_copies", ())]
    evs = list(snapshot.get("events", ()))
    if snapshot.get("event"):
        evs.append(snapshot["event"])
    for ev in evs:
        if ev.get("kind") == "cow_copy":
            pairs.append((int(ev["src"]), int(ev["dst"])))
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int]] = []
    for p in pairs:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def changed_blocks_of(snapshot: dict[str, Any]) -> set[int]:
    """Block ids touched by the snapshot's step events (alloc, touch, free, fork, cache, evict)."""
    evs = list(snapshot.get("events", ()))
    if snapshot.get("event"):
        evs.append(snapshot["event"])
    out: set[int] = set()
    for ev in evs:
        if ev.get("kind") in ("alloc", "touch", "free", "fork", "cache", "evict"):
            out.update(int(b) for b in ev.get("block_ids", ()))
    return out


def _grid_shape(n: int, cols: int | None) -> tuple[int, float]:
    if cols is None:
        cols = 16 if n <= 128 else 32
    cols = max(1, min(cols, n))
    cell = min(44.0, max(14.0, 720.0 / cols))
    return cols, cell


@dataclass(frozen=True)
class _Grid:
    """Where blocks go: ``cols`` per row, squares of ``cell`` px ``gap`` apart, ``pad`` px from the left."""

    cols: int
    cell: float
    gap: float
    pad: float = 16.0

    def origin(self, index: int, top: float, cell: float | None = None) -> tuple[float, float]:
        """Top-left corner (px) of the ``index``-th square of a grid starting at ``top``."""
        c = self.cell if cell is None else cell
        r, col = divmod(index, self.cols)
        return self.pad + col * (c + self.gap), top + r * (c + self.gap)


def _all_blocks(snapshot: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The snapshot's GPU blocks sorted by id (missing ones added as empty) and ``num_gpu_blocks``."""
    blocks = list(snapshot.get("blocks", ()))
    n = int(snapshot.get("num_gpu_blocks", len(blocks)))
    if len(blocks) < n:  # tolerate a sparse snapshot: missing blocks are empty
        have = {int(b["block_id"]) for b in blocks}
        blocks += [
            {"block_id": i, "ref_cnt": 0, "owners": [], "hashed": False, "free": True}
            for i in range(n)
            if i not in have
        ]
    blocks.sort(key=lambda b: int(b["block_id"]))
    return blocks, n


def _block_style(st: str, owners: list[str], cow: str | None) -> tuple[str, str, float, str | None]:
    """``(fill, stroke, stroke width, dash)`` of a block in state ``st``."""
    dash: str | None = None
    if st in ("used", "shared"):
        fill = owner_color(owners[0]) if owners else COLORS["muted"]
        stroke, sw = (COLORS["shared"], 2.5) if st == "shared" else ("#ffffff", 1.0)
    elif st == "cached":
        fill, stroke, sw, dash = COLORS["cached"], COLORS["cached_stroke"], 1.2, "3 2"
    else:
        fill, stroke, sw = COLORS["empty"], COLORS["empty_stroke"], 1.0
    if cow:
        stroke, sw = COLORS["cow"], 2.5
    return fill, stroke, sw, dash


def _block_svg(b: dict[str, Any], x0: float, y0: float, cell: float, cow: str | None, changed: bool) -> list[str]:
    """One GPU block: its ``rect.pl-block`` (with tooltip), owner stripes, id, ref count, change mark."""
    bid = int(b["block_id"])
    owners = [str(o) for o in b.get("owners", ())]
    st = block_state(b)
    fill, stroke, sw, dash = _block_style(st, owners, cow)
    font = 10 if cell >= 30 else 8
    tip = (
        f"block {bid}: ref_cnt={b.get('ref_cnt', 0)}"
        + (f", owners {', '.join(owners)}" if owners else "")
        + (", cached (hash kept)" if st == "cached" else "")
        + (f", CoW {cow}" if cow else "")
    )
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    hooks = attrs(
        cls="pl-block",
        data_block_id=bid,
        data_owner=" ".join(owners),
        data_ref_cnt=int(b.get("ref_cnt", 0)),
        data_state=st,
        data_hashed=bool(b.get("hashed")),
        data_cow=cow,
        data_changed=changed,
    )
    out = [
        f'<rect {hooks} x="{x0:.1f}" y="{y0:.1f}" width="{cell:.1f}" height="{cell:.1f}" rx="3" fill="{fill}" '
        f'stroke="{stroke}" stroke-width="{sw}"{dash_attr}><title>{esc(tip)}</title></rect>'
    ]
    if st == "shared" and len(owners) > 1:  # one stripe per owner along the bottom edge
        sw_ = (cell - 4) / len(owners)
        for k, o in enumerate(owners):
            out.append(
                f'<rect class="pl-owner-stripe" data-owner="{esc(o)}" x="{x0 + 2 + k * sw_:.1f}" '
                f'y="{y0 + cell - 7:.1f}" width="{sw_:.1f}" height="5" fill="{owner_color(o)}" '
                f'stroke="#ffffff" stroke-width="0.6"/>'
            )
    if cell >= 22:
        out.append(
            text(x0 + 3, y0 + 7, bid, size=font - 1, color=COLORS["muted"] if st in ("cached", "empty") else "#ffffff")
        )
    if st in ("used", "shared") and cell >= 22:
        out.append(
            text(
                x0 + cell / 2,
                y0 + cell / 2 + 3,
                f"{b.get('ref_cnt')}" if st == "shared" else "",
                size=font + 3,
                color="#ffffff",
                anchor="middle",
                weight="bold",
                cls="pl-ref",
            )
        )
    if changed:
        out.append(
            f'<rect class="pl-changed" x="{x0:.1f}" y="{y0 + cell + 0.5:.1f}" width="{cell:.1f}" '
            f'height="2.5" fill="{COLORS["highlight"]}"/>'
        )
    return out


def _cow_arrows(pairs: Sequence[tuple[int, int]], centers: dict[int, tuple[float, float]]) -> list[str]:
    """Copy-on-write arrows, src -> dst, between blocks that are drawn."""
    out = []
    for s, d in pairs:
        if s in centers and d in centers:
            (x1, y1), (x2, y2) = centers[s], centers[d]
            out.append(
                f'<line class="pl-cow" data-src="{s}" data-dst="{d}" x1="{x1:.1f}" y1="{y1:.1f}" '
                f'x2="{x2:.1f}" y2="{y2:.1f}" stroke="{COLORS["cow"]}" stroke-width="2" '
                f'marker-end="url(#pl-arrow)" opacity="0.85"/>'
            )
    return out


def _cpu_blocks(cpu: list[dict[str, Any]], grid: _Grid, y: float) -> tuple[list[str], float]:
    """The swap space under the pool (``rect.pl-cpu-block``); returns the parts and the new ``y``."""
    y += 10
    body = [
        text(grid.pad, y + 6, f"CPU swap space: {len(cpu)} blocks hold swapped-out KV", size=11, color=COLORS["muted"])
    ]
    y += 16
    ccell = min(grid.cell, 28.0)
    for k, cb in enumerate(cpu):
        x0, y0 = grid.origin(k, y, ccell)
        owners = [str(o) for o in cb.get("owners", ())]
        hooks = attrs(
            cls="pl-cpu-block",
            data_block_id=cb["block_id"],
            data_owner=" ".join(owners),
            data_ref_cnt=cb.get("ref_cnt", 0),
        )
        body.append(
            f'<rect {hooks} x="{x0:.1f}" y="{y0:.1f}" width="{ccell:.1f}" height="{ccell:.1f}" rx="3" '
            f'fill="{owner_color(owners[0]) if owners else COLORS["empty"]}" stroke="{COLORS["swapped"]}" '
            f'stroke-width="1.5" stroke-dasharray="4 2"/>'
        )
    return body, y + -(-len(cpu) // grid.cols) * (ccell + grid.gap)


def _pool_legend(owners_seen: list[str], with_cow: bool, x: float, y: float, width: float) -> tuple[list[str], float]:
    """Owner colours (first 12) and the block states; returns the parts and their height."""
    items: list[tuple[str, str, str, str | None]] = [
        (f"req {o}" if o != "radix" else "radix tree", owner_color(o), "#ffffff", None) for o in owners_seen[:12]
    ]
    items += [
        ("shared (ref>1)", "#ffffff", COLORS["shared"], None),
        ("cached free", COLORS["cached"], COLORS["cached_stroke"], "3 2"),
        ("empty", COLORS["empty"], COLORS["empty_stroke"], None),
    ]
    if with_cow:
        items.append(("CoW copy", "#ffffff", COLORS["cow"], None))
    return legend(x, y, items, width)


def _pool_heading(
    snapshot: dict[str, Any],
    title: str | None,
    states: dict[str, int],
    n: int,
    num_pairs: int,
    pad: float,
    num_gone: int = 0,
) -> tuple[str, list[str], float]:
    """The title, its two lines and the width they need; ``num_gone``: copies whose source was freed
    later in the step."""
    used = states["used"] + states["shared"]
    heading = title or f"Block pool - step {snapshot.get('step', 0)}"
    summary = (
        f"{used}/{n} blocks used  ·  {states['shared']} shared  ·  {states['cached']} cached-free  ·  "
        f"{states['empty']} empty"
        + (f"  ·  {num_pairs} CoW copies" if num_pairs else "")
        + (f"  ·  {num_gone} CoW from a block freed later this step" if num_gone else "")
    )
    need = 2 * pad + max(text_width(heading, 14, bold=True), text_width(summary, 11))
    return (
        heading,
        [
            text(pad, 16, heading, size=14, weight="bold", cls="pl-title"),
            text(pad, 33, summary, size=11, color=COLORS["muted"], cls="pl-summary"),
        ],
        need,
    )


_ARROW_DEFS = (
    f'<defs><marker id="pl-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
    f'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
    f'fill="{COLORS["cow"]}"/></marker></defs>'
)


def render_block_pool(
    snapshot: dict[str, Any],
    *,
    cow_pairs: Sequence[tuple[int, int]] | None = None,
    highlight: Iterable[int] | None = None,
    cols: int | None = None,
    title: str | None = None,
    show_legend: bool = True,
    mark: Iterable[int] | None = None,
) -> str:
    """Draw the physical block pool of one snapshot.

    Fill = the owning request's colour (a shared block shows a stripe per owner); a thick dark
    outline and the ref count mark shared blocks (``ref_cnt > 1``); red outlines and an arrow mark
    copy-on-write pairs; free blocks are pale, dashed blue when their hash is kept (cached, still
    hittable) and plain grey when empty. Blocks changed in this step get a yellow underline.

    Args:
        snapshot: pool snapshot (see the module docstring).
        cow_pairs: ``(src, dst)`` copies to draw; default :func:`cow_pairs_of` the snapshot. A copy whose
            source is free in the snapshot (freed later in the same step) is counted in the summary, not drawn.
        highlight: block ids to underline; default the blocks this step's events touched.
        cols: blocks per row (default 16, or 32 for pools above 128 blocks).
        title: heading; default ``"Block pool - step N"``.
        show_legend: draw the owner/state legend.
        mark: block ids to outline in red (``rect.pl-divergence`` with ``data-block-id``): where two
            engines' pools differ (``pagedlab.twin.view``).

    Returns:
        An ``<svg class="pl-viz pl-pool" data-step=...>`` string with exactly ``num_gpu_blocks``
        ``rect.pl-block`` elements (plus ``rect.pl-cpu-block`` for swapped-out blocks).
    """
    blocks, n = _all_blocks(snapshot)
    all_pairs = list(cow_pairs) if cow_pairs is not None else cow_pairs_of(snapshot)
    # A frame shows the pool at the end of its step: a copy whose source was freed later in the same
    # step (the last other beam holding it died) has no source left to draw an arrow from.
    held = {int(b["block_id"]) for b in blocks if int(b.get("ref_cnt", 0)) > 0}
    pairs = [(s, d) for s, d in all_pairs if s in held]
    cow_src, cow_dst = {s for s, _ in pairs}, {d for _, d in pairs}
    changed = set(highlight) if highlight is not None else changed_blocks_of(snapshot)
    marked = {int(b) for b in mark or ()}
    ncols, cell = _grid_shape(max(n, 1), cols)
    grid = _Grid(ncols, cell, max(2.0, cell * 0.1))
    width = max(600.0, grid.pad * 2 + ncols * (cell + grid.gap))
    y = 46.0
    body: list[str] = []
    states = {"used": 0, "shared": 0, "cached": 0, "empty": 0}
    owners_seen: list[str] = []
    centers: dict[int, tuple[float, float]] = {}
    for b in blocks:
        bid = int(b["block_id"])
        owners_seen += [o for o in dict.fromkeys(str(o) for o in b.get("owners", ())) if o not in owners_seen]
        states[block_state(b)] += 1
        x0, y0 = grid.origin(bid, y)
        centers[bid] = (x0 + cell / 2, y0 + cell / 2)
        cow = "dst" if bid in cow_dst else ("src" if bid in cow_src else None)
        body += _block_svg(b, x0, y0, cell, cow, bid in changed)
        if bid in marked:
            body.append(
                f'<rect class="pl-divergence" data-block-id="{bid}" x="{x0 - 2:.1f}" y="{y0 - 2:.1f}" '
                f'width="{cell + 4:.1f}" height="{cell + 4:.1f}" rx="4" fill="none" stroke="{COLORS["preempt"]}" '
                'stroke-width="3"/>'
            )
    y += (-(-n // ncols) if n else 0) * (cell + grid.gap)
    body += _cow_arrows(pairs, centers)
    cpu = list(snapshot.get("cpu_blocks", ()))
    if cpu:
        cpu_parts, y = _cpu_blocks(cpu, grid, y)
        body += cpu_parts
    heading, head, head_w = _pool_heading(snapshot, title, states, n, len(pairs), grid.pad, len(all_pairs) - len(pairs))
    width = max(width, head_w)
    if show_legend:
        lg, h = _pool_legend(owners_seen, bool(pairs), grid.pad, y + 8, width - 2 * grid.pad)
        body += lg
        y += 8 + h
    return svg_doc(
        width,
        y + 10,
        [_ARROW_DEFS] + head + body,
        cls="pl-pool",
        title=heading,
        data_step=snapshot.get("step", 0),
        data_num_blocks=n,
        data_used=states["used"] + states["shared"],
        data_shared=states["shared"],
        data_cached=states["cached"],
    )


def render_pool_and_queue(
    snapshot: dict[str, Any], max_shown: int = 32, *, title: str | None = None, **pool_kwargs: Any
) -> str:
    """The block pool of a ``pagedlab.trace`` snapshot, then its free queue, front (next to be handed
    out) on the left. Two SVGs in one HTML string. ``pool_kwargs`` go to ``render_block_pool``."""
    pool = render_block_pool(snapshot, title=title or f"Block pool after step {snapshot.get('step', 0)}", **pool_kwargs)
    q = list(snapshot.get("free_queue", ()))
    shown = q[:max_shown] + (["…"] if len(q) > max_shown else [])
    queue = render_queue_rows(
        [(f"free queue ({len(q)})", shown, None)],
        title="free queue: popleft() takes the front; freed, unhashed blocks rejoin it there",
        step=int(snapshot.get("step", 0)),
    )
    return pool + queue
