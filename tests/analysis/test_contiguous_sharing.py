"""Contiguous baseline (lab 01) and CoW sharing measurements."""

import os

import pytest

from pagedlab.analysis.contiguous import (
    CATEGORIES,
    FirstFitArena,
    contiguous_replay_steps,
    contiguous_snapshot,
    prepare_trace,
    replay_contiguous,
    replay_paged,
    reservation_size,
)
from pagedlab.analysis.sharing import beam_search_savings, parallel_sampling_savings
from pagedlab.sim.traces import TraceRequest, load_azure

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")


def test_first_fit_takes_the_first_gap_and_reports_holes():
    a = FirstFitArena(10)
    assert a.allocate(3) == 0 and a.allocate(3) == 3 and a.allocate(3) == 6
    a.free(3)
    assert a.holes() == [3, 1]
    assert a.allocate(4) is None  # 4 tokens free in total, but not contiguous
    assert a.allocate(2) == 3
    assert a.holes() == [1, 1]


def test_reservation_policies():
    assert reservation_size(100, 20, 2048, "max") == 2048
    assert reservation_size(100, 20, 2048, "oracle") == 120
    assert reservation_size(100, 28, 2048, "pow2") == 128
    assert reservation_size(100, 29, 2048, "pow2") == 256
    assert reservation_size(2000, 100, 2048, "pow2") == 2048
    with pytest.raises(ValueError):
        reservation_size(1, 1, 8, "buddy")


def _every_step_accounts_all_capacity(result, capacity):
    for s in result["steps"]:
        assert sum(s[c] for c in CATEGORIES) == capacity
        assert all(s[c] >= 0 for c in CATEGORIES)


def test_replays_account_every_token_and_paging_wastes_least():
    reqs = [TraceRequest(0.1 * i, 20 + 7 * (i % 5), 5 + 3 * (i % 4)) for i in range(40)]
    results = {p: replay_contiguous(reqs, 1024, 128, p) for p in ("max", "pow2", "oracle")}
    for r in results.values():
        _every_step_accounts_all_capacity(r, 1024)
        assert r["summary"]["finished"] == 40
    paged = replay_paged(reqs, 256, 4, 128)
    _every_step_accounts_all_capacity(paged, 1024)
    assert paged["summary"]["finished"] == 40
    assert paged["summary"]["reservation_frac"] == paged["summary"]["external_frac"] == 0
    assert results["oracle"]["summary"]["internal_frac"] == 0
    u = {p: r["summary"]["utilization"] for p, r in results.items()}
    assert u["max"] < min(u["pow2"], u["oracle"]) <= max(u["pow2"], u["oracle"]) < paged["summary"]["utilization"]
    for s in paged["steps"]:  # paging wastes at most one partial block per running request
        assert s["internal"] <= 3 * s["num_running"]


def test_paged_replay_preempts_under_pressure_and_still_finishes():
    reqs = [TraceRequest(0.0, 30, 40) for _ in range(6)]
    r = replay_paged(reqs, 12, 8, 128)
    assert r["summary"]["finished"] == 6 and r["summary"]["preemptions"] > 0


def test_prepare_trace_rebases_sorts_drops_and_cuts():
    reqs = [
        TraceRequest(7.5, 10, 100, line=3),
        TraceRequest(5.0, 64, 1),
        TraceRequest(6.0, 63, 5),
        TraceRequest(5.5, 4, 0, hash_ids=(1,), block_tokens=4),
        TraceRequest(9.0, 0, 64),
    ]
    out = prepare_trace(reqs, 64)
    # sorted and rebased to the first arrival; the 64-token prompt cannot fit and is dropped
    assert [r.arrival_time for r in out] == [0.5, 1.0, 2.5, 4.0]  # 0 s: when the dropped one arrived
    assert [(r.prompt_len, r.output_len) for r in out] == [(4, 1), (63, 1), (10, 54), (1, 63)]
    assert out[0].hash_ids == (1,) and out[0].block_tokens == 4 and out[2].line == 3  # the rest is kept
    assert reqs[0].arrival_time == 7.5 and reqs[0].output_len == 100  # the input is unchanged
    assert prepare_trace([], 64) == []
    with pytest.raises(ValueError, match="max_model_len"):
        prepare_trace(reqs, 1)


def test_replays_run_a_loaded_azure_trace_slice():
    reqs = load_azure(os.path.join(DATA, "azure2023_AzureLLMInferenceTrace_conv.csv"), limit=30, start=100)
    assert reqs[0].arrival_time > 0  # a later slice keeps the file's offset ...
    res = replay_contiguous(reqs, 8192, 2048, "pow2")
    assert res["steps"][0]["num_running"] >= 1  # ... the replay starts at the slice's first arrival
    fits = sum(r.prompt_len < 2048 for r in reqs)
    assert 0 < fits < 30  # the slice has prompts too long for max_model_len: they are dropped
    assert res["summary"]["finished"] == res["summary"]["requests"] == fits
    paged = replay_paged(reqs, 512, 16, 2048)
    assert paged["summary"]["finished"] == fits and paged["steps"][0]["num_running"] >= 1


def test_contiguous_steps_and_snapshots_follow_one_request():
    steps = [
        (s.step, [(r.request_id, r.start, r.size, r.num_tokens) for r in s.running], s.next_request_size, s.num_waiting)
        for s in contiguous_replay_steps([TraceRequest(0.0, 3, 2), TraceRequest(0.0, 4, 1)], 8, 8, "oracle")
    ]
    # r0 reserves 5 of 8 slots; r1 needs 5 and waits until r0 has sampled its 2 tokens (steps 0-1)
    assert steps == [(0, [("r0", 0, 5, 3)], 5, 1), (1, [("r0", 0, 5, 4)], 5, 1), (2, [("r1", 0, 5, 4)], 0, 0)]
    snaps = [contiguous_snapshot(st) for st in contiguous_replay_steps([TraceRequest(0.0, 3, 2)], 8, 8, "max")]
    assert snaps == [
        {
            "capacity": 8,
            "next_request_size": 0,
            "requests": [{"id": "r0", "start": 0, "reserved": 8, "num_tokens": n, "final_len": 5}],
        }
        for n in (3, 4)
    ]
    with pytest.raises(ValueError, match="policy"):
        next(contiguous_replay_steps([], 8, 8, "buddy"))


def test_first_fit_free_of_an_unknown_start_raises_and_changes_nothing():
    a = FirstFitArena(10)
    a.allocate(4)
    with pytest.raises(KeyError, match="slot 2"):
        a.free(2)
    with pytest.raises(KeyError, match="slot 9"):
        a.free(9)
    assert a.segments == [(0, 4)] and a.holes() == [6]


def test_empty_trace_gives_empty_replays():
    for res in (replay_contiguous([], 64, 32), replay_paged([], 4, 16, 32)):
        assert res["steps"] == [] and res["summary"]["finished"] == res["summary"]["requests"] == 0


def test_both_replays_pass_their_clock_on_to_the_step_loop():
    """``step_time`` maps arrivals to steps and ``max_steps`` caps the loop, in both replays alike."""
    reqs = [TraceRequest(0.0, 4, 3), TraceRequest(1.0, 4, 3)]  # the second arrives at t = 1 s
    runs = {
        "contiguous": lambda **clock: replay_contiguous(reqs, 64, 16, "oracle", **clock),
        "paged": lambda **clock: replay_paged(reqs, 16, 4, 16, **clock),
    }
    for name, replay in runs.items():
        default = replay()  # 0.05 s a step: the second request waits until step 20
        assert [s["num_running"] for s in default["steps"]][:4] == [1, 1, 1, 0], name
        assert len(default["steps"]) == 23 and default["summary"]["finished"] == 2, name
        fast = replay(step_time=0.5)  # it joins at step 2, the first one's last
        assert [s["num_running"] for s in fast["steps"]] == [1, 1, 2, 1, 1], name
        capped = replay(step_time=0.5, max_steps=2)
        assert len(capped["steps"]) == 2 and capped["summary"]["finished"] == 0, name
        assert capped["summary"]["requests"] == 2, name


def test_parallel_sampling_saving_grows_with_n_and_copies_partial_block():
    savings = [parallel_sampling_savings(n, 40, 30, 16) for n in range(1, 6)]
    assert savings[0]["saving"] == 0
    assert all(b["saving"] > 0 and a["saving"] < b["saving"] < 1 for a, b in zip(savings, savings[1:]))
    assert savings[3]["cow_copies"] == 3  # the partial prompt block: first n-1 writers copy


def test_beam_search_saves_more_than_parallel_sampling():
    for w in (2, 4):
        beam = beam_search_savings(w, 40, 60, 16, seed=1)
        par = parallel_sampling_savings(w, 40, 60, 16)
        assert 0 < par["saving"] < beam["saving"] < 1


def test_paged_snapshot_and_accounting_follow_one_request():
    from pagedlab.analysis.contiguous import paged_accounting, paged_replay_steps
    from pagedlab.analysis.lab01 import paged_snapshot

    got = [
        (paged_snapshot(s), paged_accounting(s))
        for s in paged_replay_steps([TraceRequest(0.0, 3, 3)], 4, 2, 16, id_prefix="r")
    ]
    # 3 prompt tokens in 2 blocks of 2; token 4 fills block 1, token 5 takes block 2; 3 outputs -> 3 steps
    tokens, blocks = (3, 4, 5), ([0, 1], [0, 1], [0, 1, 2])
    assert [snap for snap, _ in got] == [
        {"step": k, "num_gpu_blocks": 4, "block_size": 2, "requests": [{"id": "r0", "block_ids": b, "num_tokens": n}]}
        for k, (n, b) in enumerate(zip(tokens, blocks))
    ]
    assert [acc for _, acc in got] == [
        {"used": n, "reservation": 0, "internal": 2 * len(b) - n, "external": 0, "free": 2 * (4 - len(b))}
        | {"step": k, "num_running": 1, "num_waiting": 0}
        for k, (n, b) in enumerate(zip(tokens, blocks))
    ]


def test_memory_map_frames_account_both_memories_step_by_step():
    from pagedlab.analysis.lab01 import memory_map_frames

    reqs = [TraceRequest(0.0, 3, 3), TraceRequest(0.1, 5, 2)]
    frames = memory_map_frames(reqs, 32, 16, 4, policy="max", every=2)
    assert [f["step"] for f in frames] == [0, 2, 3]  # every 2nd step, and the last one (4 steps in all)
    for f in frames:
        for side in ("contiguous", "paged"):
            acc = f[f"{side}_acc"]
            assert sum(acc[c] for c in CATEGORIES) == 32 and acc["step"] == f["step"]
            assert f[f"{side}_done_at"] == 4
        assert {r["id"] for r in f["contiguous"]["requests"]} == {r["id"] for r in f["paged"]["requests"]}
        assert f["contiguous_acc"]["used"] == f["paged_acc"]["used"]  # the same tokens, held two ways
    assert [r["id"] for r in frames[1]["paged"]["requests"]] == ["r0", "r1"]
    assert frames[1]["contiguous_acc"]["reservation"] == 3 and frames[1]["paged_acc"]["reservation"] == 0
