"""The kit and real vLLM (``pagedlab.vllm_version``) schedule the same, step by step, and give the same greedy tokens.

All named workloads run in one vLLM subprocess (one engine per distinct engine settings), once per session.
"""

from __future__ import annotations

import subprocess

import pytest

from pagedlab.twin import Trace, compare, diff, run_on_kit, run_on_vllm
from pagedlab.vllm_env import vllm_env
from pagedlab.vllm_version import vllm_python
from tests.twin import workloads as W

NAMES = [w.name for w in W.named()]


@pytest.fixture(scope="session")
def twin_results() -> dict[str, tuple[Trace, Trace]]:
    batch = [*W.named(), W.parallel_sampling()]
    return {w.name: (k, v) for w, (k, v, _) in zip(batch, compare(batch))}


@pytest.mark.parametrize("name", NAMES)
def test_same_schedule_and_tokens(twin_results: dict[str, tuple[Trace, Trace]], name: str) -> None:
    kit, vllm = twin_results[name]
    assert vllm.steps, "vLLM ran no step"
    found = diff(kit, vllm)
    assert found is None, f"{name}: first divergence at {found}"


def test_the_workloads_exercise_what_they_are_named_for(twin_results: dict[str, tuple[Trace, Trace]]) -> None:
    """Guard against a workload that silently stopped testing its case (both traces are equal, so read vLLM's)."""

    def vllm(name: str) -> Trace:
        return twin_results[name][1]

    for name in ("pressure_fcfs", "pressure_priority"):
        assert sum(len(s.preempted) for s in vllm(name).steps) >= 2, name
    for name in ("prefix_shared_system", "prefix_repeated", "readme"):
        assert any(n > 0 for s in vllm(name).steps for n in s.num_cached_tokens.values()), name
    # vLLM 0.32's partial-hit copy-on-write (SingleTypeKVCacheManager._apply_cow) needs a hit that ends inside a
    # block, which only hybrid Mamba models get: here every hit is whole 32-token blocks (lab 03 says so)
    hits = {rid: n for name in NAMES for s in vllm(name).steps for rid, n in s.num_cached_tokens.items() if n}
    assert hits and all(n % 32 == 0 for n in hits.values()), hits
    repeated = {rid: n for s in vllm("prefix_repeated").steps for rid, n in s.num_cached_tokens.items()}
    assert repeated["r2"] == 64 and repeated["r3"] == 32  # 70 tokens: 2 whole blocks; 64: the last recomputed
    evict = {rid: n for s in vllm("prefix_eviction").steps for rid, n in s.num_cached_tokens.items()}
    assert evict["e_again"] == 0  # its blocks were evicted by the distinct prompts in between
    capped = vllm("chunked_long_threshold_48").steps
    # vLLM 0.32 lifts the threshold while one request is unfinished (c0 alone at step 0: the whole budget)
    assert capped[0].scheduled == [["c0", 256]]
    assert capped[1].scheduled == [["c0", 48], ["c1", 48]]  # c1 arrived: two requests, both capped
    assert max(n for s in vllm("chunked_long_threshold_0").steps for _, n in s.scheduled) == 256
    first = vllm("no_chunking_oversized").steps[0]
    assert [r for r, _ in first.scheduled] == ["n0"]  # n1 (100 > 68 left) stops admission (vLLM 0.32)
    assert all(len(s.scheduled) <= 2 for s in vllm("max_num_seqs_2").steps)
    aborted = vllm("abort_mid_run")
    assert aborted.finish_reasons["a0"] == ["abort"] and aborted.finish_reasons["a2"] == ["abort"]
    assert 0 < len(aborted.tokens["a0"][0]) < 20


def test_stop_is_checked_before_length() -> None:
    """The last allowed token is a stop token: vLLM 0.32 says "stop" (``check_stop`` tests stop tokens
    before max_tokens; vLLM 0.11 tested the length first and said "length")."""
    probe = W.few_seqs()
    probe.requests = probe.requests[:1]
    tokens = run_on_kit(probe).tokens["q0"][0]
    k = len(tokens)
    probe.requests[0].sampling = W.greedy(k, stop_token_ids=[tokens[-1]])
    probe.name = "length_before_stop"
    (theirs,) = run_on_vllm([probe])
    assert theirs.finish_reasons["q0"] == ["stop"]
    assert diff(run_on_kit(probe), theirs) is None


def test_n_greater_than_one_schedules_as_vllm(twin_results: dict[str, tuple[Trace, Trace]]) -> None:
    """vLLM 0.32 runs ``n > 1`` as n child requests ``"{i}_{id}"`` (``ParentRequest``); the kit's
    ``parallel_sampling="requests"`` does the same, so every step, block id and prefix hit agrees. The tokens
    are not compared: the kit samples with ``torch.multinomial``, vLLM with exponential noise
    (``v1/sample/ops/topk_topp_sampler.py`` ``random_sample``), from the same seeds ``seed + i``."""
    kit, vllm = twin_results["n_greater_than_one"]
    found = diff(kit, vllm, tokens=False)
    assert found is None, f"first divergence at {found}"
    first = vllm.steps[0]
    assert [r for r, _ in first.scheduled] == ["0_m0", "1_m0", "0_m1", "1_m1", "2_m1"]
    assert first.num_cached_tokens == {"0_m0": 0, "1_m0": 0, "0_m1": 0, "1_m1": 64, "2_m1": 64}
    aborted = next(s for s in vllm.steps if s.step == 5)
    assert ["m2", "abort"] in aborted.finished and not any(r.endswith("_m2") for r, _ in aborted.scheduled)
    for trace in (kit, vllm):
        assert [len(c) for c in trace.tokens["m1"]] == [8, 8, 8] and trace.finish_reasons["m1"] == ["length"] * 3
        assert [len(c) for c in trace.tokens["m0"]] == [8, 8] and trace.finish_reasons["m2"] == ["abort"]


def test_vllm_refuses_n_greater_than_one_greedy() -> None:
    """Why the n > 1 workload samples: vLLM 0.32's SamplingParams refuses greedy n > 1 (the kit accepts it)."""
    probe = "from vllm import SamplingParams\nSamplingParams(n=2, temperature=0.0)"
    done = subprocess.run(
        [str(vllm_python()), "-I", "-c", probe], capture_output=True, text=True, timeout=300, env=vllm_env()
    )
    assert done.returncode != 0
    assert "n must be 1 when using greedy sampling, got 2" in done.stderr
