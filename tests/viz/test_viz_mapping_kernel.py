"""render_block_table (logical -> physical) and render_kernel_walk (tiles, masked lanes)."""

import pytest

from pagedlab.viz import kernel_walk_steps, mapping_frames, render_block_table, render_kernel_walk, slot_of


def test_slot_mapping_formula():
    bt = [7, 2, 9]
    assert slot_of(bt, 0, 16) == 7 * 16
    assert slot_of(bt, 17, 16) == 2 * 16 + 1
    assert slot_of(bt, 37, 16) == 9 * 16 + 5


def test_mapping_slots_table_and_lines(parse_svg):
    svg = parse_svg(render_block_table([7, 2, 9], 37, 16, num_gpu_blocks=12, request_id="3", highlight_pos=36))
    slots = svg.all("rect", "pl-slot")
    assert len(slots) == 3 * 16
    assert sum(s.get("data-filled") == "1" for s in slots) == 37
    s36 = [s for s in slots if s.get("data-pos") == "36"][0]
    assert s36.get("data-slot") == str(9 * 16 + 4) and s36.get("data-highlight") == "1"
    entries = [(e.get("data-logical-index"), e.get("data-block-id")) for e in svg.all("rect", "pl-bt-entry")]
    assert entries == [("0", "7"), ("1", "2"), ("2", "9")]
    lines = {(l.get("data-logical-index"), l.get("data-block-id")) for l in svg.all("line", "pl-map")}
    assert lines == set(entries)
    phys = svg.all("rect", "pl-phys")
    assert len(phys) == 12
    assert {p.get("data-block-id") for p in phys if p.get("data-mine") == "1"} == {"7", "2", "9"}
    assert any("slot = 9 * 16 + 4 = 148" in t for t in svg.texts())


def test_mapping_shows_other_owners_from_pool(parse_svg):
    pool = {
        "num_gpu_blocks": 6,
        "blocks": [
            {"block_id": i, "ref_cnt": 1, "owners": ["5"] if i == 4 else [], "hashed": False, "free": False}
            for i in range(6)
        ],
    }
    svg = parse_svg(render_block_table([0, 1], 20, 16, pool=pool, request_id="0"))
    phys = {p.get("data-block-id"): p for p in svg.all("rect", "pl-phys")}
    assert len(phys) == 6 and phys["4"].get("data-owner") == "5" and phys["0"].get("data-mine") == "1"


def test_mapping_rejects_short_table():
    with pytest.raises(ValueError):
        render_block_table([1], 17, 16)


def test_mapping_frames_grow_token_by_token(parse_svg):
    frames = mapping_frames([4, 0, 3], 40, 16, 8, request_id="1")
    assert len(frames) == 40
    assert [len(f["block_table"]) for f in frames[14:18]] == [1, 1, 2, 2]
    svg = parse_svg(render_block_table(**frames[16]))
    assert len(svg.all("rect", "pl-bt-entry")) == 2
    assert svg.root.get("data-step") == "16"


def test_kernel_walk_steps_masks_the_tail():
    steps = kernel_walk_steps([7, 2, 9], seq_len=37, block_size=16, tile_size=16)
    assert len(steps) == 3
    last = steps[-1]
    assert sum(l["masked"] for l in last["lanes"]) == 3 * 16 - 37
    assert {l["block_id"] for l in last["lanes"] if not l["masked"]} == {9}
    assert all(l["block_id"] is None for l in last["lanes"] if l["masked"])
    assert last["visited"] == [7, 2]
    # a tile spanning two blocks
    wide = kernel_walk_steps([7, 2, 9], seq_len=37, block_size=16, tile_size=32)
    assert {l["block_id"] for l in wide[0]["lanes"]} == {7, 2}
    assert sum(l["masked"] for l in wide[1]["lanes"]) == 64 - 37
    with pytest.raises(ValueError):
        kernel_walk_steps([1], seq_len=20, block_size=16)


def test_kernel_walk_render_lanes(parse_svg):
    steps = kernel_walk_steps([7, 2, 9], seq_len=37, block_size=16, num_blocks=12)
    svg = parse_svg(render_kernel_walk(steps[2]))
    lanes = svg.all("rect", "pl-lane")
    assert len(lanes) == 16
    assert sum(l.get("data-masked") == "1" for l in lanes) == 11
    assert svg.root.get("data-masked") == "11" and svg.root.get("data-step") == "2"
    cur = [e.get("data-block-id") for e in svg.all("rect", "pl-bt-entry") if e.get("data-current") == "1"]
    assert cur == ["9"]
    reading = [p.get("data-block-id") for p in svg.all("rect", "pl-phys") if p.get("data-reading") == "1"]
    assert reading == ["9"]
    first = parse_svg(render_kernel_walk(steps[0]))
    assert first.text != svg.text
    assert sum(l.get("data-masked") == "1" for l in first.all("rect", "pl-lane")) == 0


def test_kernel_walk_render_without_lanes(parse_svg):
    step = {"tile": 1, "tile_size": 8, "seq_len": 12, "block_size": 8, "block_table": [3, 1]}
    svg = parse_svg(render_kernel_walk(step))
    assert sum(l.get("data-masked") == "1" for l in svg.all("rect", "pl-lane")) == 4
