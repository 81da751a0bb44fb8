"""Logical -> physical mapping of one request: logical blocks, its block table, the physical pool.

PagedAttention's central picture: a request sees a contiguous sequence of *logical* blocks
(tokens ``[i * block_size, (i + 1) * block_size)``); its *block table* says which *physical*
block of the shared pool holds logical block ``i``; the slot of token ``pos`` is
``block_table[pos // block_size] * block_size + pos % block_size``.

Hooks: ``rect.pl-slot`` (``data-pos``, ``data-logical-index``, ``data-offset``, ``data-filled``,
``data-slot``), ``rect.pl-bt-entry`` (``data-logical-index``, ``data-block-id``),
``rect.pl-phys`` (``data-block-id``, ``data-owner``, ``data-mine``), ``line.pl-map``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pagedlab.viz._svg import COLORS, attrs, owner_color, svg_doc, text


def slot_of(block_table: Sequence[int], pos: int, block_size: int) -> int:
    """Physical slot of token ``pos``: ``block_table[pos // block_size] * block_size + pos % block_size``."""
    return int(block_table[pos // block_size]) * block_size + pos % block_size


@dataclass(frozen=True)
class _MapLayout:
    """Geometry (px) of the mapping picture: logical slots, block-table column, physical grid."""

    block_size: int
    pool_cols: int
    pad: float = 16.0
    top: float = 62.0
    pcell: float = 32.0
    pgap: float = 4.0

    @property
    def slot(self) -> float:
        return max(8.0, min(16.0, 256.0 / self.block_size))

    @property
    def row_h(self) -> float:
        return max(self.slot + 8, 24.0)

    @property
    def lx(self) -> float:  # logical blocks
        return self.pad + 34

    @property
    def logical_w(self) -> float:
        return self.block_size * self.slot

    @property
    def tx(self) -> float:  # block-table column
        return self.lx + self.logical_w + 30

    @property
    def px(self) -> float:  # physical pool grid
        return self.tx + 90


def _other_owners(pool: dict[str, Any] | None, request_id: str) -> dict[int, list[str]]:
    """Block id -> owners other than ``request_id``, from an optional pool snapshot."""
    others: dict[int, list[str]] = {}
    for b in (pool or {}).get("blocks", ()):
        owners = [str(o) for o in b.get("owners", ()) if str(o) != str(request_id)]
        if owners:
            others[int(b["block_id"])] = owners
    return others


def _physical_pool(
    lay: _MapLayout, num_gpu_blocks: int, bt: list[int], others: dict[int, list[str]], request_id: str, color: str
) -> tuple[list[str], dict[int, tuple[float, float]]]:
    """The physical grid (``rect.pl-phys`` + ids) and each block's top-left corner."""
    phys_xy: dict[int, tuple[float, float]] = {}
    parts: list[str] = []
    for b in range(num_gpu_blocks):
        r, c = divmod(b, lay.pool_cols)
        x0, y0 = lay.px + c * (lay.pcell + lay.pgap), lay.top + r * (lay.pcell + lay.pgap)
        phys_xy[b] = (x0, y0)
        mine = b in bt
        if mine:
            fill, stroke = color, COLORS["text"]
        elif b in others:
            fill, stroke = "#d5d8df", "#ffffff"
        else:
            fill, stroke = COLORS["empty"], COLORS["empty_stroke"]
        owner = str(request_id) if mine else " ".join(others.get(b, []))
        parts.append(
            f"<rect {attrs(cls='pl-phys', data_block_id=b, data_owner=owner, data_mine=mine)} "
            f'x="{x0:.1f}" y="{y0:.1f}" width="{lay.pcell}" height="{lay.pcell}" rx="3" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{1.6 if mine else 1}"/>'
        )
        parts.append(
            text(
                x0 + lay.pcell / 2,
                y0 + lay.pcell / 2,
                b,
                size=10,
                anchor="middle",
                color="#ffffff" if mine else COLORS["muted"],
            )
        )
    return parts, phys_xy


def _logical_slots(
    lay: _MapLayout,
    i: int,
    pb: int,
    y0: float,
    num_tokens: int,
    color: str,
    tokens: Sequence[str] | None,
    highlight_pos: int | None,
) -> list[str]:
    """Logical block ``i``: one ``rect.pl-slot`` per token position (and the token text)."""
    slot, out = lay.slot, []
    for off in range(lay.block_size):
        pos = i * lay.block_size + off
        filled = pos < num_tokens
        hl = pos == highlight_pos
        hooks = attrs(
            cls="pl-slot",
            data_pos=pos,
            data_logical_index=i,
            data_offset=off,
            data_filled=filled,
            data_slot=pb * lay.block_size + off,
            data_highlight=hl or None,
        )
        out.append(
            f'<rect {hooks} x="{lay.lx + off * slot:.1f}" y="{y0:.1f}" width="{slot - 1:.1f}" '
            f'height="{slot:.1f}" fill="{color if filled else COLORS["empty"]}" '
            f'stroke="{COLORS["highlight"] if hl else "#ffffff"}" stroke-width="{2.5 if hl else 0.6}"/>'
        )
        if tokens is not None and filled and pos < len(tokens) and slot >= 14:
            out.append(
                text(
                    lay.lx + off * slot + slot / 2,
                    y0 + slot / 2,
                    str(tokens[pos])[:2],
                    size=7,
                    color="#ffffff",
                    anchor="middle",
                )
            )
    return out


def _table_entry(
    lay: _MapLayout, i: int, pb: int, y0: float, hl: bool, color: str, phys_xy: dict[int, tuple[float, float]]
) -> list[str]:
    """Block-table entry ``i`` (``rect.pl-bt-entry``), its arrow from the logical row and its ``line.pl-map``."""
    slot, ex = lay.slot, lay.tx
    out = [
        f'<rect {attrs(cls="pl-bt-entry", data_logical_index=i, data_block_id=pb)} x="{ex:.1f}" '
        f'y="{y0:.1f}" width="48" height="{slot:.1f}" rx="2" fill="#ffffff" '
        f'stroke="{COLORS["highlight"] if hl else COLORS["text"]}" stroke-width="{2.5 if hl else 1}"/>',
        text(ex + 24, y0 + slot / 2, pb, size=11, anchor="middle", weight="bold"),
        f'<line x1="{lay.lx + lay.logical_w + 2:.1f}" y1="{y0 + slot / 2:.1f}" x2="{ex - 2:.1f}" '
        f'y2="{y0 + slot / 2:.1f}" stroke="{COLORS["muted"]}" stroke-width="1"/>',
    ]
    if pb in phys_xy:
        qx, qy = phys_xy[pb]
        out.append(
            f"<line {attrs(cls='pl-map', data_logical_index=i, data_block_id=pb)} "
            f'x1="{ex + 48:.1f}" y1="{y0 + slot / 2:.1f}" x2="{qx + lay.pcell / 2:.1f}" '
            f'y2="{qy + lay.pcell / 2:.1f}" stroke="{COLORS["highlight"] if hl else color}" '
            f'stroke-width="{2.5 if hl else 1.4}" opacity="0.9"/>'
        )
    return out


def _mapping_heading(
    bt: list[int],
    num_tokens: int,
    block_size: int,
    request_id: str,
    title: str | None,
    highlight_pos: int | None,
    pad: float,
) -> tuple[str, list[str]]:
    """The title and the slot formula line (spelled out for ``highlight_pos`` when it is given)."""
    heading = title or f"Request {request_id}: {num_tokens} tokens in {-(-num_tokens // block_size)} blocks"
    head = [text(pad, 16, heading, size=14, weight="bold", cls="pl-title")]
    if highlight_pos is not None and highlight_pos < len(bt) * block_size:
        b = bt[highlight_pos // block_size]
        formula = (
            f"token {highlight_pos}: block_table[{highlight_pos} // {block_size}] = {b};  "
            f"slot = {b} * {block_size} + {highlight_pos % block_size} = "
            f"{slot_of(bt, highlight_pos, block_size)}"
        )
        head.append(text(pad, 34, formula, size=11, color=COLORS["text"], cls="pl-formula"))
    else:
        head.append(
            text(
                pad,
                34,
                f"block_size = {block_size};  slot = block_table[pos // block_size] * block_size + pos % block_size",
                size=11,
                color=COLORS["muted"],
            )
        )
    return heading, head


def render_block_table(
    block_table: Sequence[int],
    num_tokens: int,
    block_size: int,
    *,
    num_gpu_blocks: int | None = None,
    request_id: str = "0",
    tokens: Sequence[str] | None = None,
    pool: dict[str, Any] | None = None,
    highlight_pos: int | None = None,
    step: int | None = None,
    pool_cols: int = 8,
    title: str | None = None,
) -> str:
    """Draw one request's logical blocks, block table and the physical pool, linked by lines.

    Args:
        block_table: physical block id of each logical block.
        num_tokens: tokens written so far (slots ``0..num_tokens-1`` are filled).
        block_size: tokens per block.
        num_gpu_blocks: pool size; default ``pool["num_gpu_blocks"]`` or ``max(block_table) + 1``.
        request_id: the request drawn (its colour).
        tokens: optional token strings, one per position, shown in the slots (first 2 chars).
        pool: optional pool snapshot (``pagedlab.trace`` format) to colour other owners' blocks.
        highlight_pos: a token position whose slot-mapping arithmetic is spelled out.
        step: frame number for ``data-step`` (default 0).
        pool_cols: physical blocks per row.
        title: heading.

    Returns:
        An ``<svg class="pl-viz pl-mapping">`` string.

    Raises:
        ValueError: the block table is too short for ``num_tokens``.
    """
    bt = [int(b) for b in block_table]
    if num_tokens > len(bt) * block_size:
        raise ValueError(
            f"{num_tokens} tokens need {-(-num_tokens // block_size)} blocks, the block table has {len(bt)}"
        )
    if num_gpu_blocks is None:
        num_gpu_blocks = int(pool["num_gpu_blocks"]) if pool else (max(bt) + 1 if bt else 1)
    color = owner_color(request_id)
    lay = _MapLayout(block_size, pool_cols)
    width = max(640.0, lay.px + pool_cols * (lay.pcell + lay.pgap) + lay.pad)
    body: list[str] = [
        text(lay.lx, lay.top - 14, "logical blocks", size=11, color=COLORS["muted"], weight="bold"),
        text(lay.tx, lay.top - 14, "block table", size=11, color=COLORS["muted"], weight="bold"),
        text(
            lay.px,
            lay.top - 14,
            f"physical pool ({num_gpu_blocks} blocks)",
            size=11,
            color=COLORS["muted"],
            weight="bold",
        ),
    ]
    pool_parts, phys_xy = _physical_pool(lay, num_gpu_blocks, bt, _other_owners(pool, request_id), request_id, color)
    hl_block = highlight_pos // block_size if highlight_pos is not None else None
    for i, pb in enumerate(bt):
        y0 = lay.top + i * lay.row_h
        body.append(text(lay.pad, y0 + lay.slot / 2, f"L{i}", size=10, color=COLORS["muted"]))
        body += _logical_slots(lay, i, pb, y0, num_tokens, color, tokens, highlight_pos)
        body += _table_entry(lay, i, pb, y0, i == hl_block, color, phys_xy)
    body.extend(pool_parts)  # on top of the mapping lines
    prow = -(-num_gpu_blocks // pool_cols)
    height = max(lay.top + len(bt) * lay.row_h, lay.top + prow * (lay.pcell + lay.pgap)) + 16
    heading, head = _mapping_heading(bt, num_tokens, block_size, request_id, title, highlight_pos, lay.pad)
    return svg_doc(
        width,
        height,
        head + body,
        cls="pl-mapping",
        title=heading,
        data_step=step if step is not None else 0,
        data_request=request_id,
        data_num_tokens=num_tokens,
    )


def mapping_frames(
    block_table: Sequence[int],
    num_tokens: int,
    block_size: int,
    num_gpu_blocks: int,
    request_id: str = "0",
    tokens: Sequence[str] | None = None,
    start: int = 1,
) -> list[dict[str, Any]]:
    """Frames of a token-by-token animation of one request growing to ``num_tokens`` tokens.

    Frame ``k`` shows ``start + k`` tokens, with only the blocks needed so far in the table (a
    block is allocated when its first token arrives) and the newest token's slot spelled out.

    Returns:
        Keyword-argument dicts for :func:`render_block_table`; use them as
        ``Player(frames, render=lambda kw: render_block_table(**kw))``.
    """
    frames = []
    for t in range(start, num_tokens + 1):
        need = -(-t // block_size)
        frames.append(
            dict(
                block_table=list(block_table[:need]),
                num_tokens=t,
                block_size=block_size,
                num_gpu_blocks=num_gpu_blocks,
                request_id=request_id,
                tokens=tokens,
                highlight_pos=t - 1,
                step=t - start,
            )
        )
    return frames
