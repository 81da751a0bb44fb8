"""The computations behind the labs' added ideas (pagedlab.analysis.labNN additions)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pagedlab.analysis.lab02 import growth_per_tenfold, render_paging_analogy

NS = "{http://www.w3.org/2000/svg}"


def test_growth_per_tenfold_is_the_geometric_mean_factor() -> None:
    cost = {
        "flat": {1_000: 2.0, 10_000: 2.4, 100_000: 2.0},
        "linear": {1_000: 1.0, 10_000: 10.0, 100_000: 100.0},
        "two sizes": {10: 1.0, 1_000: 10_000.0},
    }
    g = growth_per_tenfold(cost)
    assert g["flat"] == pytest.approx(1.0)  # end points only: a bump in the middle does not count
    assert g["linear"] == pytest.approx(10.0)
    assert g["two sizes"] == pytest.approx(100.0)  # 10,000x over two decades
    with pytest.raises(ValueError, match="two pool sizes"):
        growth_per_tenfold({"one": {1_000: 1.0}})
    with pytest.raises(ValueError, match="positive"):
        growth_per_tenfold({"zero": {1_000: 0.0, 10_000: 1.0}})


def test_paging_analogy_draws_both_tables_entry_by_entry() -> None:
    svg = render_paging_analogy([5, 6, 11, 13, 2], num_gpu_blocks=20, page_table=[7, 3, 12])
    root = ET.fromstring(svg)
    assert "pl-paging" in root.get("class", "").split()
    entries = [
        (int(e.get("data-entry")), int(e.get("data-physical")))
        for e in root.iter(NS + "rect")
        if e.get("data-entry") is not None
    ]
    assert entries == [(0, 7), (1, 3), (2, 12), (0, 5), (1, 6), (2, 11), (3, 13), (4, 2)]
    physical = [e for e in root.iter(NS + "rect") if e.get("data-physical-id") is not None]
    assert len(physical) == 40  # 20 frames + 20 blocks
    used = {int(e.get("data-physical-id")) for e in physical[20:] if e.get("fill-opacity") == "0.8"}
    assert used == {5, 6, 11, 13, 2}
    texts = "".join(root.itertext())
    assert "page table" in texts and "block table" in texts
    default = ET.fromstring(render_paging_analogy([1, 2, 3], num_gpu_blocks=8))
    assert len([e for e in default.iter(NS + "rect") if e.get("data-entry") is not None]) == 6


@pytest.mark.parametrize("table, n", [([], 4), ([4], 4), ([-1], 4)])
def test_paging_analogy_rejects_bad_tables(table: list[int], n: int) -> None:
    with pytest.raises(ValueError, match="block_table"):
        render_paging_analogy(table, num_gpu_blocks=n)


def test_reservation_bound_by_hand_and_against_the_replay() -> None:
    from pagedlab.analysis.contiguous import replay_contiguous
    from pagedlab.analysis.lab01 import reservation_bound
    from pagedlab.sim.traces import TraceRequest

    reqs = [
        TraceRequest(0.0, 10, 4),
        TraceRequest(0.0, 20, 0),
        TraceRequest(0.0, 40, 100),
        TraceRequest(0.0, 70, 5),
    ]  # the last: prompt too long for M = 64, dropped
    b = reservation_bound(reqs, capacity_tokens=200, max_model_len=64)
    # (10+11+12+13) + 20 (no output: still one step) + (40+41+...+63: output cut to 24) over 4+1+24 steps
    held = 46 + 20 + sum(range(40, 64))
    assert b["mean_len"] == pytest.approx(held / 29)
    assert b["seats"] == 3 and b["fill_bound"] == pytest.approx(held / 29 / 64)
    assert b["used_frac_bound"] == pytest.approx(3 * held / 29 / 200)
    s = replay_contiguous(reqs, 200, 64, "max")["summary"]
    assert s["used_frac"] == pytest.approx(s["mean_batch"] * b["mean_len"] / 200)
    assert s["used_frac"] <= b["used_frac_bound"] + 1e-12
    with pytest.raises(ValueError, match="no request"):
        reservation_bound([TraceRequest(0.0, 70, 1)], 200, 64)
    with pytest.raises(ValueError, match="holds no"):
        reservation_bound(reqs, 63, 64)


def _ev(step: int, kind: str, req: str, **kw: object) -> dict:
    return {"step": step, "kind": kind, "req": req, **kw}


def test_lifecycle_frames_follow_the_scheduler_events() -> None:
    from pagedlab.analysis.lifecycle import lifecycle_frames

    events = [
        {"step": 0, "kind": "alloc", "block_ids": [1], "owner": "a"},  # not a scheduler event
        _ev(0, "schedule", "a"),
        _ev(0, "schedule", "b"),
        _ev(1, "schedule", "a"),
        _ev(1, "preempt", "b", mode="recompute"),
        _ev(2, "preempt", "a", mode="swap"),
        _ev(2, "schedule", "b"),
        _ev(3, "swap_in_req", "a"),
        _ev(3, "finish", "b"),
        _ev(4, "finish", "a"),
        _ev(4, "finish", "c"),
    ]
    frames = lifecycle_frames(events, request_ids=["a", "b", "c"])
    assert [f["step"] for f in frames] == [0, 1, 2, 3, 4]
    assert [f["states"] for f in frames] == [
        {"a": "RUNNING", "b": "RUNNING", "c": "WAITING"},
        {"a": "RUNNING", "b": "PREEMPTED", "c": "WAITING"},
        {"a": "SWAPPED", "b": "RUNNING", "c": "WAITING"},
        {"a": "RUNNING", "b": "FINISHED", "c": "WAITING"},
        {"a": "FINISHED", "b": "FINISHED", "c": "FINISHED"},
    ]
    assert frames[1]["moves"] == [("b", "RUNNING", "PREEMPTED")]
    assert frames[2]["moves"] == [("a", "RUNNING", "SWAPPED"), ("b", "PREEMPTED", "RUNNING")]
    fired = {k: v for k, v in frames[-1]["fired"].items() if v}
    assert fired == {
        ("WAITING", "RUNNING"): 2,
        ("RUNNING", "PREEMPTED"): 1,
        ("PREEMPTED", "RUNNING"): 1,
        ("RUNNING", "SWAPPED"): 1,
        ("SWAPPED", "RUNNING"): 1,
        ("RUNNING", "FINISHED"): 2,
        ("WAITING", "FINISHED"): 1,
    }
    assert frames[0]["fired"][("WAITING", "RUNNING")] == 2 and frames[0]["fired"][("RUNNING", "FINISHED")] == 0
    assert lifecycle_frames([]) == []


def test_lifecycle_rejects_an_impossible_transition() -> None:
    from pagedlab.analysis.lifecycle import lifecycle_frames

    with pytest.raises(ValueError, match="WAITING -> SWAPPED"):
        lifecycle_frames([_ev(0, "preempt", "a", mode="swap")])


def test_render_lifecycle_marks_states_chips_and_fired_edges() -> None:
    from pagedlab.analysis.lifecycle import lifecycle_frames, render_lifecycle

    frames = lifecycle_frames([_ev(0, "schedule", "a"), _ev(1, "preempt", "a", mode="recompute")], ["a", "b"])
    root = ET.fromstring(render_lifecycle(frames[-1]))
    assert root.get("data-step") == "1" and "pl-lifecycle" in root.get("class", "")
    counts = {
        g.get("data-state"): int(g.get("data-count")) for g in root.iter(NS + "g") if g.get("class") == "pl-state"
    }
    assert counts == {"WAITING": 1, "RUNNING": 0, "PREEMPTED": 1, "SWAPPED": 0, "FINISHED": 0}
    chips = {g.get("data-req"): g.get("data-state") for g in root.iter(NS + "g") if g.get("class") == "pl-chip"}
    assert chips == {"a": "PREEMPTED", "b": "WAITING"}
    fired = {
        (g.get("data-src"), g.get("data-dst")): int(g.get("data-fired"))
        for g in root.iter(NS + "g")
        if g.get("class") == "pl-edge"
    }
    assert fired[("WAITING", "RUNNING")] == 1 and fired[("RUNNING", "PREEMPTED")] == 1
    assert fired[("RUNNING", "FINISHED")] == 0


def test_thrashing_curve_counts_preemptions_and_redone_prefill() -> None:
    from pagedlab.analysis.lab06 import thrashing_curve
    from pagedlab.sim import H100, LLAMA_2_7B
    from pagedlab.sim.traces import TraceRequest

    reqs = [TraceRequest(arrival_time=0.001 * i, prompt_len=40, output_len=60) for i in range(12)]
    big, small = thrashing_curve(reqs, (200, 8), LLAMA_2_7B, H100)
    assert big["num_gpu_blocks"] == 200 and big["preemptions"] == 0 and big["recomputed_frac"] == 0
    assert big["finished"] == small["finished"] == 12
    assert small["preemptions"] > 0 and small["recomputed_frac"] > 0
    assert small["preemptions_per_finished"] == pytest.approx(small["preemptions"] / 12)
    assert small["makespan_s"] > big["makespan_s"] and small["mean_batch"] < big["mean_batch"]
    with pytest.raises(ValueError, match="cannot hold the longest request"):
        thrashing_curve(reqs, (6,), LLAMA_2_7B, H100)
    with pytest.raises(ValueError, match="at least one request"):
        thrashing_curve([], (6,), LLAMA_2_7B, H100)


def test_watermark_curve_trades_preemptions_for_steps() -> None:
    from pagedlab.analysis.lab06 import thrashing_curve, watermark_curve
    from pagedlab.sim import H100, LLAMA_2_7B
    from pagedlab.sim.traces import TraceRequest

    reqs = [TraceRequest(arrival_time=0.001 * i, prompt_len=40, output_len=60) for i in range(12)]
    rows = watermark_curve(reqs, (0.0, 0.25, 0.5), 15, LLAMA_2_7B, H100)
    assert [r["watermark"] for r in rows] == [0.0, 0.25, 0.5]
    # int(w * 16): vLLM 0.32.0 counts its null block (15 usable blocks would give 3 and 7)
    assert [r["watermark_blocks"] for r in rows] == [0, 4, 8]
    assert all(r["num_gpu_blocks"] == 15 and r["finished"] == 12 for r in rows)
    pre, redone = [r["preemptions"] for r in rows], [r["recomputed_tokens"] for r in rows]
    assert pre[0] > pre[1] > pre[2] == 0 and redone[0] > redone[1] > redone[2] == 0
    steps, makespan = [r["steps"] for r in rows], [r["makespan_s"] for r in rows]
    assert steps[0] < steps[1] < steps[2] and makespan[0] < makespan[1] < makespan[2]
    assert [r["output_throughput"] for r in rows] == pytest.approx([12 * 60 / m for m in makespan])
    assert all(r["recomputed_tokens"] == pytest.approx(r["recomputed_frac"] * 12 * 40) for r in rows)
    (plain,) = thrashing_curve(reqs, (15,), LLAMA_2_7B, H100)  # no watermark: the plain replay
    assert {k: rows[0][k] for k in plain} == plain
    with pytest.raises(ValueError, match="watermark"):
        watermark_curve(reqs, (1.0,), 15, LLAMA_2_7B, H100)
    with pytest.raises(ValueError, match="at least one watermark"):
        watermark_curve(reqs, (), 15, LLAMA_2_7B, H100)
    with pytest.raises(ValueError, match="cannot hold the longest request"):
        watermark_curve(reqs, (0.0,), 6, LLAMA_2_7B, H100)
    with pytest.raises(ValueError, match="at least one request"):
        watermark_curve([], (0.0,), 15, LLAMA_2_7B, H100)


def test_batch_under_reservation_caps_the_batch_at_the_seats() -> None:
    from pagedlab.analysis.lab04 import batch_under_reservation
    from pagedlab.sim.traces import TraceRequest

    reqs = [TraceRequest(0.0, 20, 10) for _ in range(8)]  # 8 short requests arrive together
    out = batch_under_reservation(reqs, capacity_tokens=256, max_model_len=100, block_size=16)
    assert out["seats"] == 2
    assert max(out["reservation"]) == 2 and out["reservation"][0] == 2  # 2 x 100 slots of 256
    assert out["paged"][0] == 8  # 8 x 2 blocks of 16 fit at once
    assert len(out["reservation"]) == 40 and len(out["paged"]) == 10  # 4 waves of 10 steps vs one
    assert out["summary"]["paged"]["finished"] == out["summary"]["reservation"]["finished"] == 8
    with pytest.raises(ValueError, match="holds no"):
        batch_under_reservation(reqs, capacity_tokens=99, max_model_len=100)
