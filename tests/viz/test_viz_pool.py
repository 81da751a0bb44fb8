"""render_block_pool: one rect per block, owners, ref counts, shared, CoW pairs, cached vs empty."""

import pytest

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request
from pagedlab.trace import Tracer, rebuild_snapshots
from pagedlab.viz import block_state, owner_color, render_block_pool
from pagedlab.viz._svg import COLORS


def _snap():
    blocks = [
        {"block_id": 0, "ref_cnt": 2, "owners": ["0", "0#1"], "hashed": True, "free": False},
        {"block_id": 1, "ref_cnt": 1, "owners": ["0"], "hashed": False, "free": False},
        {"block_id": 2, "ref_cnt": 0, "owners": [], "hashed": True, "free": True},
        {"block_id": 3, "ref_cnt": 0, "owners": [], "hashed": False, "free": True},
        {"block_id": 4, "ref_cnt": 1, "owners": ["0#1"], "hashed": False, "free": False},
        {"block_id": 5, "ref_cnt": 1, "owners": ["7"], "hashed": False, "free": False},
    ] + [{"block_id": i, "ref_cnt": 0, "owners": [], "hashed": False, "free": True} for i in range(6, 10)]
    return {
        "step": 4,
        "num_gpu_blocks": 10,
        "num_free_blocks": 5,
        "free_queue": [3, 2, 6, 7, 8, 9],
        "blocks": blocks,
        "cpu_blocks": [],
        "events": [
            {"step": 4, "kind": "cow_copy", "request_id": "0#1", "src": 1, "dst": 4},
            {"step": 4, "kind": "alloc", "block_ids": [5], "owner": "7"},
        ],
    }


def _by_id(svg):
    return {int(r.get("data-block-id")): r for r in svg.all("rect", "pl-block")}


def test_one_rect_per_block_and_step_hook(parse_svg):
    svg = parse_svg(render_block_pool(_snap()))
    assert len(svg.all("rect", "pl-block")) == 10
    assert svg.root.get("data-step") == "4"
    assert sorted(_by_id(svg)) == list(range(10))
    assert svg.root.get("data-used") == "4" and svg.root.get("data-shared") == "1"


def test_owners_ref_counts_and_states(parse_svg):
    b = _by_id(parse_svg(render_block_pool(_snap())))
    assert b[0].get("data-state") == "shared" and b[0].get("data-ref-cnt") == "2"
    assert b[0].get("data-owner").split() == ["0", "0#1"]
    assert b[0].get("stroke") == COLORS["shared"]
    assert b[1].get("data-state") == "used" and b[1].get("fill") == owner_color("0")
    assert b[5].get("fill") == owner_color("7") != owner_color("0")
    assert b[2].get("data-state") == "cached" and b[2].get("stroke-dasharray")
    assert b[3].get("data-state") == "empty" and b[3].get("fill") == COLORS["empty"]
    assert b[3].get("data-owner") == ""


def test_shared_block_shows_each_owner_and_its_ref_count(parse_svg):
    svg = parse_svg(render_block_pool(_snap()))
    stripes = [s.get("data-owner") for s in svg.all("rect", "pl-owner-stripe")]
    assert stripes == ["0", "0#1"]
    assert "2" in [t.text for t in svg.all("text", "pl-ref")]


def test_cow_pair_is_drawn(parse_svg):
    svg = parse_svg(render_block_pool(_snap()))
    b = _by_id(svg)
    assert b[1].get("data-cow") == "src" and b[4].get("data-cow") == "dst"
    assert b[4].get("stroke") == COLORS["cow"]
    line = svg.one("line", "pl-cow")
    assert (line.get("data-src"), line.get("data-dst")) == ("1", "4")
    # explicit pairs override the snapshot's
    svg2 = parse_svg(render_block_pool(_snap(), cow_pairs=[]))
    assert svg2.all("line", "pl-cow") == []


def test_changed_blocks_are_marked(parse_svg):
    b = _by_id(parse_svg(render_block_pool(_snap())))
    assert b[5].get("data-changed") == "1" and b[3].get("data-changed") == "0"


def test_block_state_helper():
    assert block_state({"ref_cnt": 3}) == "shared"
    assert block_state({"ref_cnt": 1}) == "used"
    assert block_state({"ref_cnt": 0, "hashed": True}) == "cached"
    assert block_state({"ref_cnt": 0, "hashed": False}) == "empty"


@pytest.mark.parametrize("n", [1, 16, 64, 300, 1024])
def test_pool_sizes_stay_within_width(parse_svg, n):
    snap = {
        "step": 0,
        "num_gpu_blocks": n,
        "blocks": [
            {
                "block_id": i,
                "ref_cnt": i % 2,
                "owners": [str(i % 5)] if i % 2 else [],
                "hashed": False,
                "free": i % 2 == 0,
            }
            for i in range(n)
        ],
    }
    svg = parse_svg(render_block_pool(snap))
    assert len(svg.all("rect", "pl-block")) == n


def test_sparse_snapshot_is_padded(parse_svg):
    svg = parse_svg(render_block_pool({"step": 0, "num_gpu_blocks": 5, "blocks": []}))
    assert len(svg.all("rect", "pl-block")) == 5


def test_real_fork_and_copy_on_write_trace(parse_svg):
    tr = Tracer()
    kv = KVCacheManager(block_size=4, num_gpu_blocks=8, max_model_len=64, tracer=tr)
    parent = Request("0", list(range(10)))
    kv.allocate_slots(parent, 10)
    parent.num_computed_tokens = 10
    parent.append_output_token_ids([5])
    tr.next_step()
    child = Request("0#1", list(range(10)))
    child.append_output_token_ids([6])
    kv.fork(parent, child)
    tr.next_step()
    assert kv.allocate_slots(parent, 1) is not None  # writes into the shared partial block: CoW
    snaps = rebuild_snapshots(tr.events)
    assert [s["step"] for s in snaps] == [0, 1, 2]
    after_fork = _by_id(parse_svg(render_block_pool(snaps[1])))
    assert [after_fork[i].get("data-state") for i in range(3)] == ["shared"] * 3
    cow = parse_svg(render_block_pool(snaps[2]))
    pairs = [(l.get("data-src"), l.get("data-dst")) for l in cow.all("line", "pl-cow")]
    assert len(pairs) == 1
    src, dst = map(int, pairs[0])
    b = _by_id(cow)
    assert b[src].get("data-cow") == "src" and b[dst].get("data-cow") == "dst"
    assert b[dst].get("data-owner") == "0" and b[src].get("data-owner") == "0#1"
    # the KV-cache manager's own snapshot renders too
    assert len(parse_svg(render_block_pool(kv.snapshot())).all("rect", "pl-block")) == 8


def test_swapped_out_blocks_are_drawn_in_cpu_row(parse_svg):
    snap = _snap()
    snap["cpu_blocks"] = [
        {"block_id": 0, "ref_cnt": 1, "owners": ["3"]},
        {"block_id": 1, "ref_cnt": 2, "owners": ["3", "3#1"]},
    ]
    svg = parse_svg(render_block_pool(snap))
    cpu = svg.all("rect", "pl-cpu-block")
    assert [c.get("data-owner") for c in cpu] == ["3", "3 3#1"]
    assert len(svg.all("rect", "pl-block")) == 10


def test_output_escapes_owner_names(parse_svg):
    snap = {
        "step": 0,
        "num_gpu_blocks": 1,
        "blocks": [{"block_id": 0, "ref_cnt": 1, "owners": ['<evil & "x">'], "hashed": False, "free": False}],
    }
    svg = parse_svg(render_block_pool(snap))
    assert svg.one("rect", "pl-block").get("data-owner") == '<evil & "x">'


def test_copy_from_a_block_freed_in_the_same_step_is_not_drawn(parse_svg):
    # Lab 03's beam frame: a beam copies the shared last block, then the last other beam holding it
    # dies in the same step. The frame (end of step) must not draw an arrow out of a free block.
    tr = Tracer()
    kv = KVCacheManager(block_size=4, num_gpu_blocks=8, max_model_len=64, tracer=tr)
    parent = Request("0", list(range(10)))
    kv.allocate_slots(parent, 10)
    parent.num_computed_tokens = 10
    parent.append_output_token_ids([5])
    child = Request("0#1", list(range(10)))
    child.append_output_token_ids([6])
    kv.fork(parent, child)
    tr.next_step()
    assert kv.allocate_slots(parent, 1) is not None  # CoW of the shared partial block
    kv.free(child)  # the other beam dies in the same step: the copy's source is now free
    snap = rebuild_snapshots(tr.events)[-1]
    (src, dst), *_ = [(e["src"], e["dst"]) for e in snap["events"] if e["kind"] == "cow_copy"]
    svg = parse_svg(render_block_pool(snap))
    b = _by_id(svg)
    assert b[src].get("data-state") in ("empty", "cached")
    assert svg.all("line", "pl-cow") == []
    assert b[src].get("data-cow") is None and b[dst].get("data-cow") is None
    # ...but the frame still says a copy happened this step
    assert "1 CoW from a block freed later this step" in svg.one("text", "pl-summary").text
