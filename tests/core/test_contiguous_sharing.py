"""Contiguous baseline (lab 01) and CoW sharing measurements."""
import os

import pytest

from pagedlab.core.contiguous import (CATEGORIES, FirstFitArena, TraceRequest, load_azure_trace,
                                      replay_contiguous, replay_paged, reservation_size)
from pagedlab.core.sharing import beam_search_savings, parallel_sampling_savings

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


def test_azure_trace_loads():
    reqs = load_azure_trace(os.path.join(DATA, "azure2023_AzureLLMInferenceTrace_conv.csv"), limit=50)
    assert len(reqs) == 50 and reqs[0].arrival == 0.0
    assert all(b.arrival >= a.arrival for a, b in zip(reqs, reqs[1:]))
    assert all(r.prompt_len > 0 and r.output_len > 0 for r in reqs)


def test_parallel_sampling_saving_grows_with_n_and_copies_partial_block():
    savings = [parallel_sampling_savings(n, 40, 30, 16) for n in range(1, 6)]
    assert savings[0]["saving"] == 0
    assert all(0 < b["saving"] and a["saving"] < b["saving"] < 1 for a, b in zip(savings, savings[1:]))
    assert savings[3]["cow_copies"] == 3  # the partial prompt block: first n-1 writers copy


def test_beam_search_saves_more_than_parallel_sampling():
    for w in (2, 4):
        beam = beam_search_savings(w, 40, 60, 16, seed=1)
        par = parallel_sampling_savings(w, 40, 60, 16)
        assert 0 < par["saving"] < beam["saving"] < 1
