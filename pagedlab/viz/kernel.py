"""A paged-attention kernel program's walk over the block table, tile by tile.

One Triton program of the decode kernel handles one (sequence, KV head). It loops over the
sequence's keys in tiles of ``BLOCK_N`` tokens; for lane ``i`` of tile ``t`` the token position is
``pos = t * BLOCK_N + i``, the physical block is ``block_table[pos // block_size]`` and the row
inside it ``pos % block_size``. Lanes with ``pos >= seq_len`` are *masked*: their loads must use
``mask=`` (unmasked out-of-range loads read garbage, and in the interpreter return garbage too).

The walk is a plain list of step dicts, made by :func:`kernel_walk_steps` (or by a lab's own
instrumented kernel)::

    {"program_id": 0, "tile": 1, "num_tiles": 3, "tile_start": 16, "tile_size": 16,
     "seq_len": 37, "block_size": 16, "block_table": [7, 2, 9], "num_blocks": 12,
     "lanes": [{"lane": 0, "pos": 16, "logical_block": 1, "block_id": 2, "offset": 0,
                "masked": False}, ...],
     "visited": [7]}                                # blocks read by earlier tiles

Hooks: ``rect.pl-lane`` (``data-lane``, ``data-pos``, ``data-block-id``, ``data-masked``),
``rect.pl-bt-entry`` (``data-logical-index``, ``data-current``), ``rect.pl-phys``
(``data-block-id``, ``data-reading``), ``rect.pl-token`` (``data-pos``, ``data-in-tile``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagedlab.viz._svg import COLORS, attrs, legend, svg_doc, text


def kernel_walk_steps(
    block_table: Sequence[int],
    seq_len: int,
    block_size: int,
    tile_size: int | None = None,
    program_id: int = 0,
    num_blocks: int | None = None,
) -> list[dict[str, Any]]:
    """The tiles one decode-kernel program visits, with the block and mask of every lane.

    Args:
        block_table: physical block ids of the sequence's logical blocks.
        seq_len: number of cached tokens (keys) to attend to.
        block_size: tokens per KV block.
        tile_size: ``BLOCK_N`` keys per loop iteration (default ``block_size``).
        program_id: the program's id (for the caption).
        num_blocks: pool size for the picture (default ``max(block_table) + 1``).

    Raises:
        ValueError: the block table cannot hold ``seq_len`` tokens.
    """
    bt = [int(b) for b in block_table]
    if seq_len > len(bt) * block_size:
        raise ValueError(f"seq_len={seq_len} needs {-(-seq_len // block_size)} blocks, the table has {len(bt)}")
    n_tile = tile_size or block_size
    num_tiles = max(1, -(-seq_len // n_tile))
    num_blocks = num_blocks or (max(bt) + 1 if bt else 1)
    steps: list[dict[str, Any]] = []
    visited: list[int] = []
    for t in range(num_tiles):
        lanes = []
        for i in range(n_tile):
            pos = t * n_tile + i
            masked = pos >= seq_len
            lb = pos // block_size
            lanes.append(
                {
                    "lane": i,
                    "pos": pos,
                    "logical_block": lb,
                    "block_id": None if masked or lb >= len(bt) else bt[lb],
                    "offset": pos % block_size,
                    "masked": masked,
                }
            )
        steps.append(
            {
                "program_id": program_id,
                "tile": t,
                "num_tiles": num_tiles,
                "tile_start": t * n_tile,
                "tile_size": n_tile,
                "seq_len": seq_len,
                "block_size": block_size,
                "block_table": bt,
                "num_blocks": num_blocks,
                "lanes": lanes,
                "visited": list(visited),
            }
        )
        for ln in lanes:
            if ln["block_id"] is not None and ln["block_id"] not in visited:
                visited.append(ln["block_id"])
    return steps


_INNER_W = 780.0 - 16.0 - 86.0  # drawing width right of the row labels (px)


def _keys_row(bt: list[int], bs: int, n_tile: int, seq_len: int, start: int, x0: float, y: float) -> list[str]:
    """1. The sequence's key positions, grouped by logical block; this tile's positions highlighted."""
    total = max(len(bt) * bs, -(-seq_len // n_tile) * n_tile)
    tw = min(12.0, _INNER_W / max(total, 1))
    out = []
    for pos in range(total):
        in_tile = start <= pos < start + n_tile
        valid = pos < seq_len
        gapx = (pos // bs) * 3
        fill = (
            COLORS["highlight"]
            if in_tile and valid
            else COLORS["masked"]
            if in_tile
            else COLORS["prefill"]
            if valid
            else COLORS["empty"]
        )
        out.append(
            f"<rect {attrs(cls='pl-token', data_pos=pos, data_in_tile=in_tile, data_valid=valid)} "
            f'x="{x0 + pos * tw + gapx:.1f}" y="{y:.1f}" width="{max(tw - 1, 1):.1f}" height="12" '
            f'fill="{fill}"/>'
        )
    return out


def _table_row(bt: list[int], reading_lb: set[int], x0: float, y: float) -> list[str]:
    """2. The block table; the entries this tile reads highlighted."""
    ew = min(46.0, _INNER_W / max(len(bt), 1) - 4)
    out = []
    for i, b in enumerate(bt):
        cur = i in reading_lb
        out.append(
            f"<rect {attrs(cls='pl-bt-entry', data_logical_index=i, data_block_id=b, data_current=cur)} "
            f'x="{x0 + i * (ew + 4):.1f}" y="{y:.1f}" width="{ew:.1f}" height="22" rx="3" '
            f'fill="{COLORS["highlight"] if cur else "#ffffff"}" stroke="{COLORS["text"]}" stroke-width="1"/>'
        )
        out.append(text(x0 + i * (ew + 4) + ew / 2, y + 11, b, size=11, anchor="middle", weight="bold"))
    return out


def _pool_row(num_blocks: int, bt: list[int], reading: set[int], visited: set[int], x0: float, y: float) -> list[str]:
    """3. The physical pool: blocks read now, read by earlier tiles, the sequence's, others'."""
    pw = min(30.0, _INNER_W / max(num_blocks, 1) - 3)
    fills = {"reading": COLORS["highlight"], "visited": "#f6e3a8", "mine": "#d9e7f5", "other": COLORS["empty"]}
    out = []
    for b in range(num_blocks):
        state = "reading" if b in reading else ("visited" if b in visited else ("mine" if b in bt else "other"))
        out.append(
            f"<rect {attrs(cls='pl-phys', data_block_id=b, data_reading=b in reading, data_state=state)} "
            f'x="{x0 + b * (pw + 3):.1f}" y="{y:.1f}" width="{pw:.1f}" height="22" rx="3" '
            f'fill="{fills[state]}" stroke="{COLORS["empty_stroke"]}" stroke-width="1"/>'
        )
        if pw >= 16:
            out.append(text(x0 + b * (pw + 3) + pw / 2, y + 11, b, size=9, anchor="middle"))
    return out


def _lanes_row(lanes: list[dict[str, Any]], n_tile: int, x0: float, y: float) -> list[str]:
    """4. The tile's lanes: which position, block and offset each loads, or masked."""
    lw = min(44.0, _INNER_W / max(n_tile, 1) - 2)
    out = []
    for ln in lanes:
        i, masked = int(ln["lane"]), bool(ln["masked"])
        lx = x0 + i * (lw + 2)
        dash_attr = ' stroke-dasharray="3 2"' if masked else ""
        hooks = attrs(
            cls="pl-lane",
            data_lane=i,
            data_pos=ln["pos"],
            data_block_id=ln["block_id"],
            data_offset=ln["offset"],
            data_masked=masked,
        )
        out.append(
            f'<rect {hooks} x="{lx:.1f}" y="{y:.1f}" width="{lw:.1f}" height="28" rx="2" '
            f'fill="{COLORS["masked"] if masked else COLORS["decode"]}" '
            f'stroke="{COLORS["muted"] if masked else "#ffffff"}" stroke-width="1"{dash_attr}/>'
        )
        color = COLORS["muted"] if masked else "#ffffff"
        if lw >= 26:
            out.append(text(lx + lw / 2, y + 9, f"p{ln['pos']}", size=8, anchor="middle", color=color))
            out.append(
                text(
                    lx + lw / 2,
                    y + 20,
                    "mask" if masked else f"b{ln['block_id']}:{ln['offset']}",
                    size=8,
                    anchor="middle",
                    color=color,
                )
            )
        elif masked and lw >= 6:
            out.append(text(lx + lw / 2, y + 14, "×", size=9, anchor="middle", color=COLORS["muted"]))
    return out


_KERNEL_LEGEND: list[tuple[str, str, str, str | None]] = [
    ("keys in this tile", COLORS["highlight"], "#ffffff", None),
    ("lane loads K/V", COLORS["decode"], "#ffffff", None),
    ("masked lane (pos >= seq_len)", COLORS["masked"], COLORS["muted"], "3 2"),
    ("block read earlier", "#f6e3a8", COLORS["empty_stroke"], None),
]


def render_kernel_walk(step: dict[str, Any], *, title: str | None = None) -> str:
    """Draw one tile of a kernel program's walk (see the module docstring for ``step``).

    Returns:
        ``<svg class="pl-viz pl-kernel" data-step=<tile>>`` with ``tile_size`` ``rect.pl-lane``.
    """
    bs, n_tile, seq_len = int(step["block_size"]), int(step["tile_size"]), int(step["seq_len"])
    bt = [int(b) for b in step["block_table"]]
    lanes = step.get("lanes") or kernel_walk_steps(bt, seq_len, bs, n_tile)[int(step["tile"])]["lanes"]
    tile, start = int(step["tile"]), int(step.get("tile_start", int(step["tile"]) * n_tile))
    reading = {ln["block_id"] for ln in lanes if ln["block_id"] is not None}
    num_blocks = int(step.get("num_blocks") or (max(bt) + 1 if bt else 1))
    pad, width, x0 = 16.0, 780.0, 86.0
    label: dict[str, Any] = {"size": 11, "color": COLORS["muted"], "weight": "bold"}
    body = [
        text(pad, 56.0, "keys", **label),
        *_keys_row(bt, bs, n_tile, seq_len, start, x0, 50.0),
        text(pad, 91.0, "block_table", **label),
        *_table_row(bt, {ln["logical_block"] for ln in lanes if not ln["masked"]}, x0, 80.0),
        text(pad, 131.0, "KV pool", **label),
        *_pool_row(num_blocks, bt, reading, set(step.get("visited", ())), x0, 120.0),
        text(pad, 178.0, "lanes", **label),
        *_lanes_row(lanes, n_tile, x0, 164.0),
    ]
    n_masked = sum(bool(ln["masked"]) for ln in lanes)
    lg, h = legend(pad, 204.0, _KERNEL_LEGEND, width - 2 * pad)
    body.extend(lg)
    y = 204.0 + h + 6
    n_tiles = step.get("num_tiles")
    heading = title or (
        f"Program {step.get('program_id', 0)}: tile {tile}" + (f" (tiles 0..{int(n_tiles) - 1})" if n_tiles else "")
    )
    summary = (
        f"keys [{start}, {start + n_tile}) of seq_len {seq_len}; reads block(s) "
        f"{', '.join(str(b) for b in sorted(reading)) or '-'}; {n_masked} of {n_tile} lanes masked"
    )
    head = [
        text(pad, 16, heading, size=14, weight="bold", cls="pl-title"),
        text(pad, 33, summary, size=11, color=COLORS["muted"], cls="pl-summary"),
    ]
    return svg_doc(
        width,
        y,
        head + body,
        cls="pl-kernel",
        title=heading,
        data_step=tile,
        data_masked=n_masked,
        data_program=step.get("program_id", 0),
    )
