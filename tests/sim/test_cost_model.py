"""Roofline cost model: regimes, swap vs recompute, pool sizing, and Vidur's GPU measurements."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pagedlab.sim.cost_model import CostModel, num_gpu_blocks
from pagedlab.sim.hardware import A100_80G, H100, H200, get_gpu
from pagedlab.sim.models import LLAMA_2_7B, LLAMA_2_70B, LLAMA_3_8B, LLAMA_3_70B, LLAMA_13B, SMOLLM2_135M, get_model

DATA = Path(__file__).resolve().parents[2] / "data"


def test_model_specs_match_published_sizes():
    # KV bytes per token (COURSE.md facts) and parameter counts (model cards).
    assert LLAMA_13B.kv_bytes_per_token == 2 * 40 * 5120 * 2 == 819_200  # vLLM paper's 800 KB
    assert LLAMA_3_8B.kv_bytes_per_token == 128 * 1024
    assert LLAMA_3_70B.kv_bytes_per_token == LLAMA_2_70B.kv_bytes_per_token == 320 * 1024
    assert SMOLLM2_135M.kv_bytes_per_token == 46_080
    assert LLAMA_2_7B.num_params / 1e9 == pytest.approx(6.74, abs=0.01)
    assert LLAMA_13B.num_params / 1e9 == pytest.approx(13.0, abs=0.05)
    assert LLAMA_2_70B.num_params / 1e9 == pytest.approx(69.0, abs=0.05)
    assert LLAMA_3_70B.num_params / 1e9 == pytest.approx(70.6, abs=0.05)
    assert SMOLLM2_135M.num_params / 1e6 == pytest.approx(134.5, abs=0.1)
    assert get_model("7B") is LLAMA_2_7B
    with pytest.raises(KeyError, match="known"):
        get_model("gpt-5")


def test_gpu_lookup_and_tensor_parallel():
    assert get_gpu("h100") is H100 and get_gpu("A100-80G") is A100_80G
    two = get_gpu("2xH200")
    assert two.num_gpus == 2 and two.memory_bytes == 2 * H200.memory_bytes and two.peak_flops == 2 * H200.peak_flops
    with pytest.raises(KeyError):
        get_gpu("V100")


def test_decode_is_bandwidth_bound_and_big_prefill_compute_bound():
    for gpu in (A100_80G, H100, H200):
        cm = CostModel(LLAMA_2_7B, gpu)
        decode = cm.step_cost([(1000, 1)] * 64)
        assert decode.bound == "memory" and decode.arithmetic_intensity < 20
        prefill = cm.step_cost([(0, 4096)])
        assert prefill.bound == "compute"
        # Decode time is about (weights + KV) / bandwidth.
        want = (LLAMA_2_7B.weight_bytes + 64 * 1001 * LLAMA_2_7B.kv_bytes_per_token) / gpu.hbm_bandwidth
        assert decode.time == pytest.approx(want, rel=0.02)
    cm = CostModel(LLAMA_2_7B, H100)
    # A decode batch costs little more than one sequence (weights dominate); prefill scales with tokens.
    assert cm.decode_step_time([100] * 32) < 1.5 * cm.decode_step_time([100])
    assert cm.prefill_step_time(8192) == pytest.approx(2 * cm.prefill_step_time(4096), rel=0.1)


def test_step_cost_edge_cases():
    cm = CostModel(LLAMA_2_7B, H100, step_overhead_s=0.002)
    assert cm.step_time([]) == 0.002
    assert cm.step_time([(0, 1)]) > 0.002
    with pytest.raises(ValueError):
        cm.step_cost([(0, 0)])
    with pytest.raises(ValueError):
        CostModel(LLAMA_2_7B, H100, compute_efficiency=0)
    # Attention FLOPs grow with context: same new tokens, longer context costs more FLOPs.
    assert cm.step_cost([(8000, 512)]).flops > cm.step_cost([(0, 512)]).flops


@pytest.mark.parametrize("model", [LLAMA_2_7B, LLAMA_13B, LLAMA_2_70B])
@pytest.mark.parametrize("gpu", [A100_80G, H100, H200])
def test_swap_recompute_crossover_is_independent_of_tokens(model, gpu):
    cm = CostModel(model, gpu)
    ratios = {t: cm.recompute_time(t) / cm.swap_time(t) for t in (16, 512, 4096, 100_000)}
    assert max(ratios.values()) == pytest.approx(min(ratios.values()), rel=1e-12)
    assert ratios[16] == pytest.approx(cm.recompute_over_swap(), rel=1e-12)
    # At the crossover FLOP rate the two cost the same.
    eff = cm.crossover_flops_per_s() / gpu.peak_flops
    if eff <= 1:
        at = CostModel(model, gpu, compute_efficiency=eff)
        assert at.recompute_time(1000) == pytest.approx(at.swap_time(1000), rel=1e-9)
    assert cm.swap_time(1000) == pytest.approx(2 * 1000 * model.kv_bytes_per_token / gpu.pcie_bandwidth)


def test_gqa_makes_swapping_win_for_70b():
    # 70B has 8 KV heads: 8x less KV per parameter than 7B, so recomputing is far dearer than swapping.
    assert CostModel(LLAMA_2_70B, H100).recompute_over_swap() > 10 * CostModel(LLAMA_2_7B, H100).recompute_over_swap()


def test_num_gpu_blocks_follows_vllm_formula():
    n = num_gpu_blocks(LLAMA_2_7B, H100, block_size=16, gpu_memory_utilization=0.9)
    assert n == int((H100.memory_bytes * 0.9 - LLAMA_2_7B.weight_bytes) // (16 * LLAMA_2_7B.kv_bytes_per_token))
    assert 7000 < n < 8000  # ~121k tokens of KV for a 7B on one H100
    with pytest.raises(ValueError, match="use more GPUs"):
        num_gpu_blocks(LLAMA_2_70B, A100_80G)
    assert num_gpu_blocks(LLAMA_2_70B, A100_80G.times(2)) > 0


def _vidur(path):
    rows = [r for r in csv.DictReader(Path(path).read_text().splitlines()) if r["num_tensor_parallel_workers"] == "1"]
    return {int(r["num_tokens"]): r for r in rows}


@pytest.mark.parametrize(
    "gpu,fname", [(A100_80G, "vidur_a100_Llama-2-7b-hf_mlp.csv"), (H100, "vidur_h100_Llama-2-7b-hf_mlp.csv")]
)
def test_linear_layers_within_factor_of_vidur_measurements(gpu, fname):
    rows = _vidur(DATA / fname)
    cm = CostModel(LLAMA_2_7B, gpu)
    r0 = rows[1]
    # The profiled model is the one we price.
    assert (int(r0["n_embd"]), int(r0["n_expanded_embd"]), int(r0["n_head"])) == (4096, 11008, 32)
    ratios = []
    for t in (1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096):
        measured_s = sum(float(rows[t][f"time_stats.{op}.median"]) for op, _, _ in cm.linear_ops()) / 1e3
        predicted_s = cm.linear_layer_time(t)
        ratios.append(measured_s / predicted_s)
    # Roofline is a lower bound: measured is slower, but within a small factor (1.2x - 2.7x here).
    assert all(1 / 3 <= r <= 3 for r in ratios), ratios
    assert min(ratios) >= 0.9
