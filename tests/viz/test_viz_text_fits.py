"""No title or label of a widget frame runs past its picture (clipped titles: "freed block…", "eq long").

Each ``<text>``'s extent is estimated with the layouts' own ``text_width`` (a generous estimate for the
kit's font) from its ``x``, anchor, size and weight, and must lie inside the ``viewBox``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pagedlab.analysis.lab02 import render_pool_and_queue
from pagedlab.viz import render_batch_gantt, render_block_pool
from pagedlab.viz._svg import text_width
from pagedlab.viz.pictures import render_queue_rows

NS = "{http://www.w3.org/2000/svg}"


def text_boxes(svg: str) -> list[tuple[float, float, str]]:
    """``(left, right, text)`` of every ``<text>`` in every ``<svg>`` of ``svg``, in its svg's units,
    with that svg's viewBox width appended as a last ``(width, width, "")`` marker per svg."""
    out = []
    for doc in svg.split("</svg>")[:-1]:
        root = ET.fromstring(doc[doc.index("<svg") :] + "</svg>")
        width = float(root.get("viewBox").split()[2])
        for el in root.iter(NS + "text"):
            s = el.text or ""
            w = text_width(s, float(el.get("font-size")), bold=el.get("font-weight") == "bold")
            x = float(el.get("x"))
            left = {"start": x, "middle": x - w / 2, "end": x - w}[el.get("text-anchor", "start")]
            out.append((left, left + w, s, width))
    return out


def clipped(svg: str) -> list[str]:
    return [f"{s!r} spans {a:.0f}..{b:.0f} of 0..{w:.0f}" for a, b, s, w in text_boxes(svg) if a < 0 or b > w]


def _pool_snapshot(n_blocks: int = 8, free: int = 6) -> dict:
    blocks = [
        {"block_id": i, "ref_cnt": 1, "owners": ["0"], "hashed": False, "free": False} for i in range(n_blocks - free)
    ]
    blocks += [
        {"block_id": i, "ref_cnt": 0, "owners": [], "hashed": False, "free": True}
        for i in range(n_blocks - free, n_blocks)
    ]
    return {
        "step": 3,
        "num_gpu_blocks": n_blocks,
        "blocks": blocks,
        "free_queue": list(range(n_blocks - free, n_blocks)),
    }


def test_lab02_free_queue_title_fits_with_a_short_queue():
    # lab 02's frame: "free queue: popleft() takes the front; freed, unhashed blocks rejoin it there" over 6 blocks
    html = render_pool_and_queue(_pool_snapshot())
    assert any("freed, unhashed blocks rejoin it there" in s for _, _, s, _ in text_boxes(html))
    assert clipped(html) == []


@pytest.mark.parametrize("label", ["free queue (3)", "a much longer queue label (12)"])
def test_queue_rows_labels_fit_left_of_the_boxes(label):
    svg = render_queue_rows([(label, [1, 2, 3], None)], title="q")
    boxes = {s: (a, b) for a, b, s, _ in text_boxes(svg)}
    first_box_x = float(ET.fromstring(svg).find(f"{NS}rect[@class='pl-queue-item']").get("x"))
    assert boxes[label][1] <= first_box_x and clipped(svg) == []


def test_gantt_request_labels_fit_right_of_the_owner_mark():
    # lab 05's toy: requests r0, r1, r2 and "long" ("req long" was drawn over the owner mark: "eq long")
    steps = [
        {"step": 0, "scheduled": [("r0", 2, True), ("r1", 2, True), ("r2", 2, True)]},
        {"step": 1, "scheduled": [("r0", 1, False), ("long", 5, True)]},
        {"step": 2, "scheduled": [("a-request-with-a-long-id", 1, True)]},
    ]
    svg = render_batch_gantt(steps)
    labels = [(a, s) for a, _, s, _ in text_boxes(svg) if s.startswith("req ")]
    assert {s for _, s in labels} == {"req r0", "req r1", "req r2", "req long", "req a-request-with-a-long-id"}
    mark_right = 16.0 + 5  # the owner colour mark: x = pad, width 5
    assert all(left >= mark_right for left, _ in labels), labels
    assert clipped(svg) == []


def test_gantt_long_title_widens_the_chart():
    svg = render_batch_gantt([{"step": 0, "scheduled": [("0", 4, True)]}], title="budget 8: " + "x" * 120)
    assert clipped(svg) == []


def test_pool_summary_fits_with_every_clause():
    # a small pool, CoW copies drawn and one from a block freed later in the step: the longest summary
    snap = _pool_snapshot(n_blocks=6, free=2)
    snap["blocks"][4] = {"block_id": 4, "ref_cnt": 0, "owners": [], "hashed": True, "free": True}
    snap["events"] = [
        {"kind": "cow_copy", "src": 0, "dst": 1, "request_id": "0"},
        {"kind": "cow_copy", "src": 4, "dst": 2, "request_id": "0"},
    ]
    svg = render_block_pool(snap, cols=6)
    assert any("freed later this step" in s for _, _, s, _ in text_boxes(svg))
    assert clipped(svg) == []


def test_pool_long_title_fits():
    assert clipped(render_block_pool(_pool_snapshot(), title="Block pool after step 3: " + "y" * 80)) == []
