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

from typing import Any, Dict, List, Optional, Sequence

from pagedlab.viz._svg import COLORS, attrs, owner_color, svg_doc, text


def slot_of(block_table: Sequence[int], pos: int, block_size: int) -> int:
    """Physical slot of token ``pos``: ``block_table[pos // block_size] * block_size + pos % block_size``."""
    return int(block_table[pos // block_size]) * block_size + pos % block_size


def render_block_table(block_table: Sequence[int], num_tokens: int, block_size: int, *,
                       num_gpu_blocks: Optional[int] = None, request_id: str = "0",
                       tokens: Optional[Sequence[str]] = None, pool: Optional[Dict[str, Any]] = None,
                       highlight_pos: Optional[int] = None, step: Optional[int] = None,
                       pool_cols: int = 8, title: Optional[str] = None) -> str:
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
        raise ValueError(f"{num_tokens} tokens need {-(-num_tokens // block_size)} blocks, "
                         f"the block table has {len(bt)}")
    if num_gpu_blocks is None:
        num_gpu_blocks = int(pool["num_gpu_blocks"]) if pool else (max(bt) + 1 if bt else 1)
    color = owner_color(request_id)
    others: Dict[int, List[str]] = {}
    if pool:
        for b in pool.get("blocks", ()):
            owners = [str(o) for o in b.get("owners", ()) if str(o) != str(request_id)]
            if owners:
                others[int(b["block_id"])] = owners

    pad, top = 16.0, 62.0
    slot = max(8.0, min(16.0, 256.0 / block_size))
    row_h = max(slot + 8, 24.0)
    lx = pad + 34
    logical_w = block_size * slot
    tx = lx + logical_w + 30           # block-table column
    px = tx + 90                       # physical pool grid
    pcell, pgap = 32.0, 4.0
    prow = -(-num_gpu_blocks // pool_cols)
    width = max(640.0, px + pool_cols * (pcell + pgap) + pad)
    body: List[str] = [
        text(lx, top - 14, "logical blocks", size=11, color=COLORS["muted"], weight="bold"),
        text(tx, top - 14, "block table", size=11, color=COLORS["muted"], weight="bold"),
        text(px, top - 14, f"physical pool ({num_gpu_blocks} blocks)", size=11, color=COLORS["muted"], weight="bold"),
    ]
    phys_xy: Dict[int, tuple] = {}
    pool_parts: List[str] = []
    for b in range(num_gpu_blocks):
        r, c = divmod(b, pool_cols)
        x0, y0 = px + c * (pcell + pgap), top + r * (pcell + pgap)
        phys_xy[b] = (x0, y0)
        mine = b in bt
        if mine:
            fill, stroke = color, COLORS["text"]
        elif b in others:
            fill, stroke = "#d5d8df", "#ffffff"
        else:
            fill, stroke = COLORS["empty"], COLORS["empty_stroke"]
        owner = str(request_id) if mine else " ".join(others.get(b, []))
        pool_parts.append(f'<rect {attrs(cls="pl-phys", data_block_id=b, data_owner=owner, data_mine=mine)} '
                          f'x="{x0:.1f}" y="{y0:.1f}" width="{pcell}" height="{pcell}" rx="3" fill="{fill}" '
                          f'stroke="{stroke}" stroke-width="{1.6 if mine else 1}"/>')
        pool_parts.append(text(x0 + pcell / 2, y0 + pcell / 2, b, size=10, anchor="middle",
                               color="#ffffff" if mine else COLORS["muted"]))

    hl_block = highlight_pos // block_size if highlight_pos is not None else None
    for i, pb in enumerate(bt):
        y0 = top + i * row_h
        body.append(text(pad, y0 + slot / 2, f"L{i}", size=10, color=COLORS["muted"]))
        for off in range(block_size):
            pos = i * block_size + off
            filled = pos < num_tokens
            hl = pos == highlight_pos
            body.append(
                f'<rect {attrs(cls="pl-slot", data_pos=pos, data_logical_index=i, data_offset=off, data_filled=filled, data_slot=pb * block_size + off, data_highlight=hl or None)} '
                f'x="{lx + off * slot:.1f}" y="{y0:.1f}" width="{slot - 1:.1f}" height="{slot:.1f}" '
                f'fill="{color if filled else COLORS["empty"]}" stroke="{COLORS["highlight"] if hl else "#ffffff"}" '
                f'stroke-width="{2.5 if hl else 0.6}"/>')
            if tokens is not None and filled and pos < len(tokens) and slot >= 14:
                body.append(text(lx + off * slot + slot / 2, y0 + slot / 2, str(tokens[pos])[:2], size=7,
                                 color="#ffffff", anchor="middle"))
        ex, ey = tx, y0
        body.append(f'<rect {attrs(cls="pl-bt-entry", data_logical_index=i, data_block_id=pb)} x="{ex:.1f}" '
                    f'y="{ey:.1f}" width="48" height="{slot:.1f}" rx="2" fill="#ffffff" '
                    f'stroke="{COLORS["highlight"] if i == hl_block else COLORS["text"]}" '
                    f'stroke-width="{2.5 if i == hl_block else 1}"/>')
        body.append(text(ex + 24, ey + slot / 2, pb, size=11, anchor="middle", weight="bold"))
        body.append(f'<line x1="{lx + logical_w + 2:.1f}" y1="{y0 + slot / 2:.1f}" x2="{ex - 2:.1f}" '
                    f'y2="{y0 + slot / 2:.1f}" stroke="{COLORS["muted"]}" stroke-width="1"/>')
        if pb in phys_xy:
            qx, qy = phys_xy[pb]
            body.append(f'<line {attrs(cls="pl-map", data_logical_index=i, data_block_id=pb)} '
                        f'x1="{ex + 48:.1f}" y1="{ey + slot / 2:.1f}" x2="{qx + pcell / 2:.1f}" y2="{qy + pcell / 2:.1f}" '
                        f'stroke="{COLORS["highlight"] if i == hl_block else color}" '
                        f'stroke-width="{2.5 if i == hl_block else 1.4}" opacity="0.9"/>')

    body.extend(pool_parts)  # on top of the mapping lines
    height = max(top + len(bt) * row_h, top + prow * (pcell + pgap)) + 16
    heading = title or f"Request {request_id}: {num_tokens} tokens in {-(-num_tokens // block_size)} blocks"
    head = [text(pad, 16, heading, size=14, weight="bold", cls="pl-title")]
    if highlight_pos is not None and highlight_pos < len(bt) * block_size:
        b = bt[highlight_pos // block_size]
        formula = (f"token {highlight_pos}: block_table[{highlight_pos} // {block_size}] = {b};  "
                   f"slot = {b} * {block_size} + {highlight_pos % block_size} = "
                   f"{slot_of(bt, highlight_pos, block_size)}")
        head.append(text(pad, 34, formula, size=11, color=COLORS["text"], cls="pl-formula"))
    else:
        head.append(text(pad, 34, f"block_size = {block_size};  slot = block_table[pos // block_size] * "
                                  f"block_size + pos % block_size", size=11, color=COLORS["muted"]))
    return svg_doc(width, height, head + body, cls="pl-mapping", title=heading,
                   data_step=step if step is not None else 0, data_request=request_id,
                   data_num_tokens=num_tokens)


def mapping_frames(block_table: Sequence[int], num_tokens: int, block_size: int, num_gpu_blocks: int,
                   request_id: str = "0", tokens: Optional[Sequence[str]] = None,
                   start: int = 1) -> List[Dict[str, Any]]:
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
        frames.append(dict(block_table=list(block_table[:need]), num_tokens=t, block_size=block_size,
                           num_gpu_blocks=num_gpu_blocks, request_id=request_id, tokens=tokens,
                           highlight_pos=t - 1, step=t - start))
    return frames
