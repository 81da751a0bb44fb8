"""Radix tree of the SGLang-style prefix cache, drawn left to right.

Input is ``RadixCache.snapshot()`` (``pagedlab/core/radix_cache.py``)::

    {"page_size": 1, "evictable_size": 7, "protected_size": 5,
     "root": {"id": 0, "key": [], "value": [], "lock_ref": 1, "last_access_time": 0,
              "children": [{"id": 3, "key": [1, 2, 3], "value": [...], "lock_ref": 0, ...}]}}

A node is an edge holding a token span. Locked nodes (``lock_ref > 0``: a running request uses
them, so they cannot be evicted) are solid green; unlocked ones are evictable (pale); nodes that
the previous frame had and this one lost were evicted and are drawn as dashed ghosts where they
were; nodes new in this frame (inserted, or created by a split) get a yellow outline.

Hooks: ``g.pl-radix-node`` with ``data-node-id``, ``data-parent-id``, ``data-lock-ref``,
``data-len``, ``data-state`` (``root`` | ``locked`` | ``evictable`` | ``evicted``), ``data-new``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pagedlab.viz._svg import COLORS, attrs, esc, legend, svg_doc, text

NODE_W, NODE_H, COL_W, ROW_H = 138.0, 36.0, 168.0, 46.0


def as_tree_snapshot(obj: Any) -> dict[str, Any]:
    """A tree snapshot from a snapshot dict, a ``RadixCache`` (anything with ``.snapshot()``) or a
    bare root node dict (``{"id", "key", "lock_ref", "children"}``)."""
    if hasattr(obj, "snapshot") and callable(obj.snapshot):
        obj = obj.snapshot()
    if "root" not in obj:
        obj = {"root": obj}
    return obj


def _index(root: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """node id -> {"node", "parent", "depth"} for every node, root included."""
    out: dict[int, dict[str, Any]] = {}
    stack: list[tuple[dict[str, Any], int | None, int]] = [(root, None, 0)]
    while stack:
        node, parent, depth = stack.pop()
        out[int(node["id"])] = {"node": node, "parent": parent, "depth": depth}
        for c in node.get("children", ()):
            stack.append((c, int(node["id"]), depth + 1))
    return out


def _label(key: Sequence[int], token_text: Callable[[Sequence[int]], str] | None, limit: int = 18) -> str:
    if token_text is not None:
        s = token_text(list(key)).replace("\n", "⏎")
    else:
        s = " ".join(str(t) for t in key)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _attach_ghosts(
    evicted: Iterable[dict[str, Any]] | None, idx: dict[int, dict[str, Any]], root_id: int
) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """Ghost nodes (copies) and, per parent id, the ghosts hanging under it: under their parent when
    it survives (or is itself a ghost), else under the root."""
    ghosts = [dict(g) for g in (evicted or ())]
    ghost_children: dict[int, list[dict[str, Any]]] = {}
    known = set(idx) | {int(g["id"]) for g in ghosts}
    for g in ghosts:
        p = g.get("parent")
        p = int(p) if p is not None and int(p) in known else root_id
        g["parent"] = p
        ghost_children.setdefault(p, []).append(g)
    return ghosts, ghost_children


def _layout(
    root: dict[str, Any], ghost_children: dict[int, list[dict[str, Any]]]
) -> tuple[dict[int, tuple[int, float]], int]:
    """``(depth, y)`` of every node (ghosts included) and the number of leaf rows: leaves take one row
    each in depth-first order, a parent sits midway between its first and last child."""
    pos: dict[int, tuple[int, float]] = {}
    rows = 0

    def place(node: dict[str, Any], depth: int) -> float:
        nonlocal rows
        nid = int(node["id"])
        kids = list(node.get("children", ())) + ghost_children.get(nid, [])
        ys = [place(c, depth + 1) for c in kids]
        if ys:
            y = (ys[0] + ys[-1]) / 2
        else:
            y = rows * ROW_H
            rows += 1
        pos[nid] = (depth, y)
        return y

    place(root, 0)
    return pos, rows


def _node_state(info: dict[str, Any]) -> str:
    if info["parent"] is None:
        return "root"
    return "locked" if int(info["node"].get("lock_ref", 0)) > 0 else "evictable"


def _radix_heading(
    snap: dict[str, Any], idx: dict[int, dict[str, Any]], num_ghosts: int, step: int, title: str | None, pad: float
) -> tuple[str, list[str], Any, Any]:
    """Title, summary line, and the evictable / protected sizes (the snapshot's, else counted)."""
    tokens = {"locked": 0, "evictable": 0, "root": 0}
    for info in idx.values():
        tokens[_node_state(info)] += len(info["node"].get("key", ()))
    heading = title or f"Radix tree - step {step}"
    ev_size = snap.get("evictable_size", tokens["evictable"])
    pr_size = snap.get("protected_size", tokens["locked"])
    summary = (
        f"{len(idx) - 1} nodes  ·  {tokens['locked'] + tokens['evictable']} tokens: {pr_size} protected "
        f"(locked), {ev_size} evictable" + (f"  ·  {num_ghosts} evicted" if num_ghosts else "")
    )
    return (
        heading,
        [
            text(pad, 16, heading, size=14, weight="bold", cls="pl-title"),
            text(pad, 33, summary, size=11, color=COLORS["muted"], cls="pl-summary"),
        ],
        ev_size,
        pr_size,
    )


_RADIX_LEGEND: list[tuple[str, str, str, str | None]] = [
    ("locked (lock_ref>0)", "#cfe8cf", COLORS["running"], None),
    ("evictable", "#ffffff", COLORS["muted"], None),
    ("evicted", COLORS["grid"], COLORS["muted"], "4 3"),
    ("new / split", "#ffffff", COLORS["highlight"], None),
]


def render_radix_tree(
    snapshot: Any,
    *,
    evicted: Iterable[dict[str, Any]] | None = None,
    new_ids: Iterable[int] | None = None,
    highlight: Iterable[int] | None = None,
    token_text: Callable[[Sequence[int]], str] | None = None,
    step: int = 0,
    title: str | None = None,
) -> str:
    """Draw a radix-tree snapshot.

    Args:
        snapshot: ``RadixCache.snapshot()`` dict, or a ``RadixCache``.
        evicted: ghost nodes ``{"id", "key", "parent"}`` (parent = node id it hung under) to draw
            dashed; see :func:`radix_frames`, which computes them by diffing snapshots.
        new_ids: node ids to outline as new.
        highlight: node ids on a matched path (thick blue outline).
        token_text: turns a token-id list into text for the labels (e.g. ``tokenizer.decode``);
            default: the ids themselves.
        step: frame number for ``data-step``.

    Returns:
        ``<svg class="pl-viz pl-radix" data-step=...>`` with one ``g.pl-radix-node`` per node
        (root and ghosts included).
    """
    snap = as_tree_snapshot(snapshot)
    root = snap["root"]
    idx = _index(root)
    ghosts, ghost_children = _attach_ghosts(evicted, idx, int(root["id"]))
    pos, rows = _layout(root, ghost_children)
    pad, top = 16.0, 56.0
    width = max(640.0, pad * 2 + max(d for d, _ in pos.values()) * COL_W + NODE_W)

    def xy(nid: int) -> tuple[float, float]:
        d, y = pos[nid]
        return pad + d * COL_W, top + y

    body = _radix_body(
        idx, ghosts, xy, {int(i) for i in (new_ids or ())}, {int(i) for i in (highlight or ())}, token_text
    )
    y = top + max(rows, 1) * ROW_H + 10
    lg, h = legend(pad, y, _RADIX_LEGEND, width - 2 * pad)
    heading, head, ev_size, pr_size = _radix_heading(snap, idx, len(ghosts), step, title, pad)
    return svg_doc(
        width,
        y + h + 6,
        head + body + lg,
        cls="pl-radix",
        title=heading,
        data_step=step,
        data_num_nodes=len(idx) - 1,
        data_evictable=ev_size,
        data_protected=pr_size,
    )


def _radix_body(
    idx: dict[int, dict[str, Any]],
    ghosts: list[dict[str, Any]],
    xy: Callable[[int], tuple[float, float]],
    new_set: set[int],
    hl: set[int],
    token_text: Callable[[Sequence[int]], str] | None,
) -> list[str]:
    """The tree's SVG elements: edges first (under the boxes), then one box per node, ghosts dashed."""
    body = [_edge(xy(info["parent"]), xy(nid), False, nid) for nid, info in idx.items() if info["parent"] is not None]
    body += [_edge(xy(g["parent"]), xy(int(g["id"])), True, int(g["id"])) for g in ghosts]
    for nid, info in idx.items():
        node = info["node"]
        key, lock_ref = node.get("key", ()), int(node.get("lock_ref", 0))
        state = _node_state(info)
        body.append(_box(xy(nid), nid, info["parent"], key, lock_ref, state, nid in new_set, nid in hl, token_text))
    body += [
        _box(xy(int(g["id"])), int(g["id"]), g["parent"], g.get("key", ()), 0, "evicted", False, False, token_text)
        for g in ghosts
    ]
    return body


def _edge(p: tuple[float, float], c: tuple[float, float], ghost: bool, nid: int) -> str:
    x1, y1 = p[0] + NODE_W, p[1] + NODE_H / 2
    x2, y2 = c[0], c[1] + NODE_H / 2
    mx = (x1 + x2) / 2
    dash = ' stroke-dasharray="4 3"' if ghost else ""
    return (
        f'<path class="pl-radix-edge" data-node-id="{nid}" d="M{x1:.1f},{y1:.1f} C{mx:.1f},{y1:.1f} '
        f'{mx:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" fill="none" stroke="{COLORS["muted"]}" stroke-width="1.3"{dash}/>'
    )


def _box(
    p: tuple[float, float],
    nid: int,
    parent: int | None,
    key: Sequence[int],
    lock: int,
    state: str,
    new: bool,
    hl: bool,
    token_text: Callable[[Sequence[int]], str] | None,
) -> str:
    x, y = p
    fill = {"root": COLORS["text"], "locked": "#cfe8cf", "evictable": "#ffffff", "evicted": COLORS["grid"]}[state]
    stroke = {
        "root": COLORS["text"],
        "locked": COLORS["running"],
        "evictable": COLORS["muted"],
        "evicted": COLORS["muted"],
    }[state]
    sw = 1.5
    if new:
        stroke, sw = COLORS["highlight"], 3.0
    if hl:
        stroke, sw = COLORS["prefill"], 3.0
    dash = ' stroke-dasharray="4 3"' if state == "evicted" else ""
    hooks = attrs(
        cls="pl-radix-node",
        data_node_id=nid,
        data_parent_id=parent,
        data_lock_ref=lock,
        data_len=len(key),
        data_state=state,
        data_new=new,
        data_highlight=hl or None,
    )
    parts = [
        f"<g {hooks}>",
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{fill}" '
        f'stroke="{stroke}" stroke-width="{sw}"{dash}/>',
    ]
    if state == "root":
        parts.append(
            text(x + NODE_W / 2, y + NODE_H / 2, "root", size=12, color="#ffffff", anchor="middle", weight="bold")
        )
    else:
        label = _label(key, token_text)
        col = COLORS["muted"] if state == "evicted" else COLORS["text"]
        parts.append(text(x + 7, y + 11, label, size=11, color=col))
        meta = (
            f"{len(key)} tok"
            + (f" · lock {lock}" if state == "locked" else "")
            + (" · evicted" if state == "evicted" else "")
        )
        parts.append(text(x + 7, y + 26, meta, size=9, color=COLORS["muted"]))
        parts.append(f"<title>node {nid}: {esc(_label(key, token_text, 200))}</title>")
    parts.append("</g>")
    return "".join(parts)


def radix_frames(snapshots: Sequence[Any]) -> list[dict[str, Any]]:
    """Frames for a radix-tree animation from consecutive snapshots.

    Node ids are stable (``RadixCache`` never renumbers; a split keeps the child's id and adds a
    new parent), so a node present in frame ``k-1`` and absent from frame ``k`` was evicted, and
    one absent before is new.

    Returns:
        Keyword-argument dicts for :func:`render_radix_tree` (``snapshot``, ``evicted``,
        ``new_ids``, ``step``).
    """
    frames: list[dict[str, Any]] = []
    prev: dict[int, dict[str, Any]] = {}
    for k, s in enumerate(snapshots):
        snap = as_tree_snapshot(s)
        idx = _index(snap["root"])
        gone = [
            {"id": nid, "key": list(info["node"].get("key", ())), "parent": info["parent"]}
            for nid, info in prev.items()
            if nid not in idx and info["parent"] is not None
        ]
        new_ids = [nid for nid, info in idx.items() if prev and nid not in prev and info["parent"] is not None]
        frames.append({"snapshot": snap, "evicted": gone, "new_ids": new_ids, "step": snap.get("step", k)})
        prev = idx
    return frames
