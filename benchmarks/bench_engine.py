"""pagedlab vs HF transformers on CPU: two workloads, four ways of serving them, and the roofline.

README workload: the 32 real chat prompts of ``data/prompts.jsonl`` (chat template applied), each
with its own output budget (16-128 tokens), greedy, EOS ignored so every system produces exactly the
same tokens, all requests arriving at t = 0.
Azure workload (``--azure-reps``, default 1): 128 requests whose prompt and output lengths are
drawn (seed 0) from the Azure LLM inference conversation trace (``data/``), divided by
``--azure-scale`` (8) and outputs capped at ``--azure-max-out`` (32) so a repetition stays within a
few minutes on 2 cores; prompts are slices of the real chat prompts' tokens; arrivals at t = 0.

Systems (each run in its own subprocess, so peak RSS is per system; interleaved within each
repetition, as ../shared/reference/hf_baselines.md recommends):
  hf_sequential   ``model.generate`` one request at a time (batch 1)
  hf_static       one ``generate`` over all prompts, left padding, ``max_new_tokens`` = the
                  largest budget; outputs cut to each budget (useful tokens counted)
  hf_continuous   transformers' own continuous batching (``ContinuousBatchingManager``) with a
                  cache (48 pages x 256 = 12,288 tokens) and batch budget (512 tokens) comparable
                  to pagedlab's, the configuration that scored best in hf_baselines.md
  pagedlab        ``pagedlab.LLM``: 512 blocks x 16 = 8,192 tokens (Azure: 768 = 12,288), max 512
                  batched tokens, default (CPU) settings
hf_continuous and pagedlab run in every one of ``--reps`` (5) repetitions; the slow baselines
(hf_sequential, hf_static) in the first ``--slow-reps`` (2). Per-repetition ratios of pagedlab to
each baseline are reported with min / median / max.

Robustness: before each repetition the script records the load average and times a fixed matmul
loop 7 times; a busy machine (load above the core count, a calibration spread above 15 %, or a
calibration median 15 % off the first repetition's) is flagged in the output.

Roofline: after each repetition a separate subprocess measures this machine's matmul FLOP/s on the
decode step's shapes (all 30 layers' projections plus the LM head, at every batch size >= 16 the
systems used in that repetition, and 1, 16, 32; the faster of MKL and oneDNN) and its copy bandwidth
(256 MiB ``torch`` copy, read + write), so each repetition's steps meet roofs measured in the same
machine state. Every decode step (pagedlab exactly; HF continuous batching reconstructed from its
per-token timestamps) is compared with ``max(FLOPs / FLOP/s(batch), bytes / bandwidth)`` from
``pagedlab.sim.cost_model``.

Usage:  python benchmarks/bench_engine.py [--reps 5] [--slow-reps 2] [--azure-reps 1] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Every worker (pagedlab, the HF baselines, the roof measurement) runs under the kit's OpenMP wait policy
# (pagedlab/__init__.py; `make bench` exports it too). libgomp reads it when torch loads, so without this
# a direct run's roof worker, which imports torch before pagedlab, spun: measured on 2 cores, its matmul
# roof took 1.5 s instead of 85 ms with another process busy (a flattered share), ~20% less on a quieter
# machine (an understated one), while the pagedlab worker ran passive.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
MODES = ["hf_sequential", "hf_static", "hf_continuous", "pagedlab"]
SLOW_MODES = ("hf_sequential", "hf_static")
AZURE_MODES = ["hf_continuous", "pagedlab"]
BUSY_SPREAD = 0.15
# Decode steps: (seconds, [context length before the step of each decoding sequence]).
Steps = list[tuple[float, list[int]]]


def machine_facts() -> dict[str, Any]:
    """Cores, torch threads, OMP wait policy, load average, CPU model and torch version of this run."""
    import platform

    import torch

    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), platform.processor())
    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
        "loadavg_1m": os.getloadavg()[0],
        "cpu_model": model,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "bf16": bf16_summary(),
        "dtype": bench_dtype(),
    }


#: ``--dtype`` reaches the worker processes through this variable (pagedlab, the HF baselines and the roofs).
ENV_DTYPE = "PAGEDLAB_BENCH_DTYPE"


def bench_dtype() -> str:
    """The dtype this run computes in: "float32" (default) or "bfloat16" (``--dtype``)."""
    return os.environ.get(ENV_DTYPE, "float32")


def bf16_summary() -> str:
    """The CPU's bf16 instructions, for every benchmark's header (``pagedlab.model.precision.bf16_summary``)."""
    sys.path.insert(0, str(ROOT))
    from pagedlab.model.precision import bf16_summary as summary

    return summary()


def workload(name: str = "readme", scale: int = 8, max_out: int = 32) -> tuple[list[list[int]], list[int]]:
    """``(prompt token ids, output budgets)`` of the README workload or of the Azure one (see the module doc)."""
    from pagedlab.model.loader import load_tokenizer

    tok = load_tokenizer()
    rows = [json.loads(ln) for ln in (ROOT / "data/prompts.jsonl").read_text().splitlines() if ln.strip()]
    prompts = []
    for r in rows:
        ids = tok.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    if name == "readme":
        return prompts, [r["max_tokens"] for r in rows]
    if name != "azure":
        raise ValueError(f"unknown workload {name!r}; use 'readme' or 'azure'")
    with open(ROOT / "data/azure2023_AzureLLMInferenceTrace_conv.csv", newline="") as f:
        trace = [(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in csv.DictReader(f)]
    pool = [t for p in prompts for t in p]
    rng = random.Random(0)
    out_prompts, budgets = [], []
    for ctx, gen in rng.sample(trace, 128):
        n = min(max(ctx // scale, 8), 1024)
        start = rng.randrange(len(pool))
        out_prompts.append([pool[(start + i) % len(pool)] for i in range(n)])
        budgets.append(min(max(gen // scale, 1), max_out))
    return out_prompts, budgets


def hf_model() -> Any:
    import torch  # lazy: the benchmark's header and --help run without torch

    from pagedlab.model.hf_reference import load_hf_model
    from pagedlab.model.loader import _converted_dir, load_model, resolve_model_path

    load_model(None, tokenizer_only=True)  # make sure the converted folder exists
    # The converted folder holds the GGUF's de-quantized fp32 weights with an HF config.
    return load_hf_model(
        _converted_dir(resolve_model_path(None)), dtype=getattr(torch, bench_dtype()), attn_implementation="sdpa"
    )


class _Stamp:
    """A generate() streamer that records when each new token (batch row 0..B-1) appears."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.seen_prompt = False

    def put(self, value: Any) -> None:
        if not self.seen_prompt:
            self.seen_prompt = True
            return
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def steps_from_token_times(token_times: list[list[float]], prompt_lens: list[int], gap_s: float = 1e-3) -> Steps:
    """Reconstruct pure decode steps from per-request token timestamps (HF continuous batching).

    Tokens emitted within ``gap_s`` of each other belong to one step. A step counts as a pure decode
    step when none of its tokens is a request's first (that one ends a prefill); a prefill chunk that
    emits no token is invisible, so this over-estimates some decode steps. Token ``j >= 1`` of a
    request was computed over ``prompt_len + j - 1`` cached tokens. The step time is the gap to the
    previous step's tokens.
    """
    events = sorted((t, j, i) for i, ts in enumerate(token_times) for j, t in enumerate(ts))
    groups: list[list[tuple[float, int, int]]] = []
    for e in events:
        if groups and e[0] - groups[-1][-1][0] <= gap_s:
            groups[-1].append(e)
        else:
            groups.append([e])
    steps: Steps = []
    for prev, g in zip(groups, groups[1:]):
        if all(j >= 1 for _, j, _ in g):
            steps.append((g[-1][0] - prev[-1][0], [prompt_lens[i] + j - 1 for _, j, i in g]))
    return steps


def run_pagedlab(
    prompts: list[list[int]], budgets: list[int], num_gpu_blocks: int, engine: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Serve the workload with ``pagedlab.LLM``; records every pure decode step's batch and contexts.

    ``engine``: the ``LLM`` keywords instead of this benchmark's (bench_vllm.py passes vLLM's settings).
    """
    from pagedlab import LLM, SamplingParams
    from pagedlab.sampling_params import RequestOutputKind

    # Prefix caching off: HF has none, and the comparison is of the engines' forward passes and batching.
    llm = LLM(
        **(
            engine
            or dict(
                num_gpu_blocks=num_gpu_blocks,
                max_num_seqs=64 if len(prompts) > 32 else 32,
                max_num_batched_tokens=512,
                enable_prefix_caching=False,
                dtype=bench_dtype(),
            )
        )
    )
    eng = llm.llm_engine
    runner = eng.model_runner
    forward, seen = runner.forward, []

    def spy(out: Any) -> Any:
        seen.append([(s.start, s.num_tokens) for s in out.scheduled])
        return forward(out)

    runner.forward = spy
    # FINAL_ONLY, as LLM.generate sets it (requests go in through the engine here only to share one t0).
    final = RequestOutputKind.FINAL_ONLY
    params = [SamplingParams(temperature=0, max_tokens=b, ignore_eos=True, output_kind=final) for b in budgets]
    t0 = time.perf_counter()
    for p, sp in zip(prompts, params):
        eng.add_request(None, {"prompt_token_ids": p}, sp, arrival_time=t0)
    outs = llm._run([str(i) for i in range(len(prompts))], use_tqdm=False)
    wall = time.perf_counter() - t0
    steps = [
        (st.step_time, [c for c, _ in sched])
        for st, sched in zip(eng.step_stats, seen)
        if sched and all(n == 1 for _, n in sched)
    ]
    return {
        "wall_s": wall,
        "tokens": sum(len(o.outputs[0].token_ids) for o in outs),
        "token_ids": [list(o.outputs[0].token_ids) for o in outs],
        "ttft": [o.pagedlab_metrics.ttft for o in outs],
        "tpot": [o.pagedlab_metrics.tpot for o in outs if o.pagedlab_metrics.tpot],
        "decode_steps": steps,
        "preemptions": eng.stats.num_preemptions,
    }


def run_hf_sequential(model: Any, prompts: list[list[int]], budgets: list[int]) -> dict[str, Any]:
    """``model.generate`` per request at batch 1; every token after the first is a batch-1 decode step."""
    from pagedlab.model.hf_reference import hf_greedy

    t0 = time.perf_counter()
    tokens, ttft, tpot, steps = 0, [], [], []
    for p, b in zip(prompts, budgets):
        s = _Stamp()
        tokens += len(hf_greedy(model, p, b, ignore_eos=True, streamer=s))
        ttft.append(s.times[0] - t0)
        if len(s.times) > 1:
            tpot.append((s.times[-1] - s.times[0]) / (len(s.times) - 1))
        steps += [(s.times[j] - s.times[j - 1], [len(p) + j - 1]) for j in range(1, len(s.times))]
    return {"wall_s": time.perf_counter() - t0, "tokens": tokens, "ttft": ttft, "tpot": tpot, "decode_steps": steps}


def run_hf_static(model: Any, prompts: list[list[int]], budgets: list[int]) -> dict[str, Any]:
    """One left-padded ``generate`` over all prompts; useful tokens are each request's budget."""
    import torch

    L = max(len(p) for p in prompts)
    ids = torch.tensor([[2] * (L - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts])
    s = _Stamp()
    t0 = time.perf_counter()
    with torch.inference_mode():
        model.generate(
            ids,
            attention_mask=mask,
            do_sample=False,
            max_new_tokens=max(budgets),
            min_new_tokens=max(budgets),
            eos_token_id=-1,
            pad_token_id=2,
            streamer=s,
        )
    return {
        "wall_s": time.perf_counter() - t0,
        "tokens": sum(budgets),
        "ttft": [s.times[0] - t0] * len(prompts),
        "tpot": [(s.times[b - 1] - s.times[0]) / (b - 1) for b in budgets if b > 1],
        "decode_steps": [],
    }


def run_hf_continuous(model: Any, prompts: list[list[int]], budgets: list[int]) -> dict[str, Any]:
    """transformers' ``ContinuousBatchingManager`` with a cache and batch budget comparable to pagedlab's."""
    from transformers import GenerationConfig
    from transformers.generation import ContinuousBatchingConfig

    cbc = ContinuousBatchingConfig(
        num_blocks=48, max_batch_tokens=512, use_cuda_graph=False, auto_switch_to_flash=False, seed=0
    )
    gc = GenerationConfig(do_sample=False, max_new_tokens=max(budgets), eos_token_id=-1, pad_token_id=2)
    with model.continuous_batching_context_manager(
        generation_config=gc, continuous_batching_config=cbc, block=True, timeout=30, warmup=False
    ) as mgr:
        t0 = time.perf_counter()
        for i, (p, b) in enumerate(zip(prompts, budgets)):
            mgr.add_request(p, request_id=f"r{i}", max_new_tokens=b, eos_token_id=-1, record_timestamps=True)
        results: dict[str, Any] = {}
        while len(results) < len(prompts):
            r = mgr.get_result(timeout=300)
            if r is not None and r.is_finished():
                results[r.request_id] = r
        wall = time.perf_counter() - t0
    stamps = [list(results[f"r{i}"].timestamps or []) for i in range(len(prompts))]
    return {
        "wall_s": wall,
        "tokens": sum(len(r.generated_tokens) for r in results.values()),
        "ttft": [ts[0] - t0 for ts in stamps if ts],
        "tpot": [(ts[-1] - ts[0]) / (len(ts) - 1) for ts in stamps if len(ts) > 1],
        "decode_steps": steps_from_token_times(stamps, [len(p) for p in prompts]),
    }


def run_mode(mode: str, name: str, scale: int, max_out: int) -> dict[str, Any]:
    """One system on one workload, in this process: throughput, latencies, peak RSS, decode steps."""
    prompts, budgets = workload(name, scale, max_out)
    if mode == "pagedlab":
        r = run_pagedlab(prompts, budgets, 512 if name == "readme" else 768)
    elif mode in MODES:
        runner: Callable[[Any, list[list[int]], list[int]], dict[str, Any]] = {
            "hf_sequential": run_hf_sequential,
            "hf_static": run_hf_static,
            "hf_continuous": run_hf_continuous,
        }[mode]
        r = runner(hf_model(), prompts, budgets)
    else:
        raise SystemExit(f"unknown mode {mode}")
    ttft, tpot = r.pop("ttft"), r.pop("tpot")
    r.pop("token_ids", None)
    return {
        "mode": mode,
        "workload": name,
        **r,
        "tok_per_s": r["tokens"] / r["wall_s"],
        "ttft_median_s": statistics.median(ttft) if ttft else None,
        "tpot_median_s": statistics.median(tpot) if tpot else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# --- the machine: busy or not, and its roofs -----------------------------------------------------
def calibration_loop(n: int = 7) -> list[float]:
    """Seconds of a fixed matmul loop ([256 x 576] @ [576 x 1536], 40 times), ``n`` times."""
    import torch

    a, b = torch.randn(256, 576), torch.randn(576, 1536)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        for _ in range(40):
            torch.mm(a, b)
        times.append(time.perf_counter() - t)
    return times


def _linear_seconds(weights: list[Any], batch: int, apply: Callable[[Any, Any], Any], reps: int = 3) -> float:
    """Best-of-``reps`` seconds to run ``x [batch, in]`` (in :func:`bench_dtype`) through every weight once."""
    import torch

    dt = getattr(torch, bench_dtype())
    xs = {w_in: torch.randn(batch, w_in).to(dt) for w_in in {w[1] for w in weights}}
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for w, w_in in weights:
            apply(xs[w_in], w)
        best = min(best, time.perf_counter() - t)
    return best


def measure_roofs(batches: list[int]) -> dict[str, Any]:
    """This machine's copy bandwidth and its matmul FLOP/s on a decode step's shapes at each batch size.

    The shapes are SmolLM2-135M's: 30 x (qkv 576->960, o 576->576, gate_up 576->3072, down 1536->576)
    plus the LM head 576->49152, with random weights in the run's dtype (:func:`bench_dtype`: 540 MB in fp32,
    so each step streams them from memory as the engine does; in bf16 oneDNN runs its AMX / AVX512-BF16
    kernels where the CPU has them). The faster of ``F.linear`` (MKL / oneDNN) and oneDNN's packed linear counts.
    """
    import torch
    import torch.nn.functional as F

    from pagedlab.model.cpu_linear import PackedLinear, onednn_available
    from pagedlab.sim.models import SMOLLM2_135M as m

    src, dst = torch.ones(64 << 20), torch.empty(64 << 20)  # 256 MiB each
    dst.copy_(src)
    copy_s = min(_timed(lambda: dst.copy_(src)) for _ in range(5))
    shapes = [(960, 576), (576, 576), (3072, 576), (576, 1536)] * m.num_layers + [(m.vocab_size, 576)]
    plain = [((torch.randn(o, i) * 0.02).to(getattr(torch, bench_dtype())), i) for o, i in shapes]
    out: dict[str, Any] = {"copy_bandwidth_Bps": 2 * src.numel() * 4 / copy_s, "matmul": {}}
    for b in sorted(set(batches)):
        out["matmul"][b] = {
            "flops": 2.0 * b * sum(o * i for o, i in shapes),
            "mkl_s": _linear_seconds(plain, b, lambda x, w: F.linear(x, w)),
        }
    if onednn_available():
        packed = [(PackedLinear(w), i) for w, i in plain]
        del plain
        for b in out["matmul"]:
            out["matmul"][b]["onednn_s"] = _linear_seconds(packed, b, lambda x, w: w(x))
    for rec in out["matmul"].values():
        rec["flops_per_s"] = rec["flops"] / min(rec["mkl_s"], rec.get("onednn_s", float("inf")))
    return out


def median_roofs(per_rep: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over repetitions of each measured roof (bandwidth, FLOP/s at each batch measured)."""
    batches = sorted({b for r in per_rep for b in r["matmul"]}, key=int)
    return {
        "copy_bandwidth_Bps": statistics.median(r["copy_bandwidth_Bps"] for r in per_rep),
        "matmul": {
            b: {"flops_per_s": statistics.median(r["matmul"][b]["flops_per_s"] for r in per_rep if b in r["matmul"])}
            for b in batches
        },
        "reps": len(per_rep),
    }


def _timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def roofline_share(steps: Steps, roofs: dict[str, Any], min_batch: int = 16) -> dict[str, Any] | None:
    """Roofline time over measured time for the decode steps at batch >= ``min_batch``.

    ``roofs`` is :func:`measure_roofs`'s result (after JSON: batch sizes as strings).

    Returns None without such steps; else the step count, median batch, summed measured and roofline
    seconds, their ratio (``share``), and the median per-step share.
    """
    return roofline_share_by_rep([(steps, roofs)], min_batch)


def roofline_share_by_rep(parts: list[tuple[Steps, dict[str, Any]]], min_batch: int = 16) -> dict[str, Any] | None:
    """:func:`roofline_share` over several repetitions, each rep's steps against the roofs measured
    right after that rep (so a busy stretch slows the steps and their roof alike).

    Returns None without steps at batch >= ``min_batch``; else :func:`roofline_share`'s figures over all
    steps, plus ``per_rep_share`` (each repetition's share; None for one without such steps).
    """
    from pagedlab.sim.cost_model import CostModel
    from pagedlab.sim.hardware import GPUSpec
    from pagedlab.sim.models import SMOLLM2_135M

    rows: list[tuple[float, float, int]] = []  # (measured s, roofline s, batch)
    per_rep: list[float | None] = []
    for steps, roofs in parts:
        chosen = [(t, ctx) for t, ctx in steps if len(ctx) >= min_batch and t > 0]
        bw = roofs["copy_bandwidth_Bps"]
        # Matmul FLOP/s grows with the batch (more rows per weight read): a batch is credited with the best
        # rate measured at it or any smaller batch, so a measurement disturbed by noise cannot lower the roof.
        rates = sorted((int(b), rec["flops_per_s"]) for b, rec in roofs["matmul"].items())
        mine = []
        for t, ctx in chosen:
            rate = max(r for b, r in rates if b <= len(ctx))
            cpu = GPUSpec("this CPU", memory_bytes=0, hbm_bandwidth=bw, peak_flops=rate, pcie_bandwidth=1.0)
            mine.append((t, CostModel(SMOLLM2_135M, cpu).decode_step_time(ctx), len(ctx)))
        per_rep.append(sum(r for _, r, _ in mine) / sum(t for t, _, _ in mine) if mine else None)
        rows += mine
    if not rows:
        return None
    measured, roof = sum(t for t, _, _ in rows), sum(r for _, r, _ in rows)
    return {
        "steps": len(rows),
        "median_batch": statistics.median(b for _, _, b in rows),
        "measured_s": measured,
        "roofline_s": roof,
        "share": roof / measured,
        "median_step_share": statistics.median(r / t for t, r, _ in rows),
        "median_step_ms": 1000 * statistics.median(t for t, _, _ in rows),
        "per_rep_share": per_rep,
    }


def profile_scheduler() -> dict[str, Any]:
    """Share of step time spent in the scheduler + KV-cache manager with 64 running sequences."""
    from pagedlab import LLM, SamplingParams

    prompts, budgets = workload()
    llm = LLM(num_gpu_blocks=1024, max_num_seqs=64, max_num_batched_tokens=1024, enable_prefix_caching=False)
    for p in prompts * 2:
        llm.llm_engine.add_request(
            None, {"prompt_token_ids": p}, SamplingParams(temperature=0, max_tokens=48, ignore_eos=True)
        )
    eng = llm.llm_engine
    while eng.has_unfinished_requests():
        eng.step()
    at64 = [s for s in eng.step_stats if len(s.scheduled) == 64]
    step = sum(s.step_time for s in at64)
    sched = sum(s.sched_time for s in at64)
    return {
        "steps_with_64_running": len(at64),
        "step_time_s": step,
        "sched_time_s": sched,
        "sched_share": sched / step if step else None,
        "median_step_ms": 1000 * statistics.median(s.step_time for s in at64) if at64 else None,
    }


# --- the driver ----------------------------------------------------------------------------------
def _worker(args: list[str]) -> dict[str, Any]:
    """Run ``bench_engine.py --worker ...`` in a fresh process and return its JSON line."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, env=env)
    if p.returncode:
        print(p.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"worker {' '.join(args)} failed")
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def run_reps(args: argparse.Namespace, modes: list[str]) -> dict[str, Any]:
    """All repetitions of both workloads, interleaved, with a busy check before each repetition."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        "readme": {m: [] for m in modes},
        "azure": {m: [] for m in AZURE_MODES},
    }
    checks: list[dict[str, Any]] = []
    wl = ["--scale", str(args.azure_scale), "--max-out", str(args.azure_max_out)]
    for rep in range(max(args.reps, args.azure_reps)):
        cal = calibration_loop()
        checks.append({"rep": rep + 1, "loadavg_1m": os.getloadavg()[0], "calibration_s": cal})
        todo = [("readme", m) for m in modes if rep < args.reps and (m not in SLOW_MODES or rep < args.slow_reps)]
        todo += [("azure", m) for m in AZURE_MODES if rep < args.azure_reps]
        batches = {1, 16, 32}
        for name, m in todo:
            r = _worker([m, "--workload", name, *wl])
            runs[name][m].append({**r, "rep": rep + 1})
            batches |= {len(c) for _, c in r["decode_steps"] if len(c) >= 16}
            print(
                f"rep {rep + 1} {name:6s} {m:14s} {r['tok_per_s']:6.1f} tok/s  wall {r['wall_s']:6.1f} s  "
                f"RSS {r['peak_rss_mb']:5.0f} MB",
                flush=True,
            )
        # The roofs of this repetition, measured right after it: the same machine state as its steps.
        checks[-1]["roofs"] = _worker(["roofs", *map(str, sorted(batches))])
    return {"runs": runs, "checks": checks}


def busy_warnings(checks: list[dict[str, Any]], cores: int) -> list[str]:
    """Why the figures may be distorted: load above the core count, a noisy or drifting calibration loop."""
    out = []
    first = statistics.median(checks[0]["calibration_s"]) if checks else 0.0
    for c in checks:
        cal = c["calibration_s"]
        med = statistics.median(cal)
        spread = (max(cal) - min(cal)) / med
        if c["loadavg_1m"] > cores:
            out.append(f"rep {c['rep']}: load average {c['loadavg_1m']:.1f} > {cores} cores")
        if spread > BUSY_SPREAD:
            out.append(f"rep {c['rep']}: calibration loop spread {100 * spread:.0f}% (> {100 * BUSY_SPREAD:.0f}%)")
        if abs(med / first - 1) > BUSY_SPREAD:
            out.append(f"rep {c['rep']}: calibration loop {med / first:.2f}x the first repetition's")
    return out


def ratios(runs: dict[str, list[dict[str, Any]]], base: str = "pagedlab") -> dict[str, dict[str, Any]]:
    """Per repetition, pagedlab's tok/s over each other system's (same repetition), with min/median/max."""
    out = {}
    mine = {r["rep"]: r["tok_per_s"] for r in runs.get(base, [])}
    for m, rs in runs.items():
        per = [mine[r["rep"]] / r["tok_per_s"] for r in rs if m != base and r["rep"] in mine]
        if per:
            out[m] = {"per_rep": per, "min": min(per), "median": statistics.median(per), "max": max(per)}
    return out


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Medians per system over its repetitions (peak RSS: the largest)."""

    def med(rs: list[dict[str, Any]], k: str) -> float | None:
        vals = [r[k] for r in rs if r[k] is not None]
        return statistics.median(vals) if vals else None

    return {
        m: {
            **{k: med(rs, k) for k in ("tok_per_s", "wall_s", "ttft_median_s", "tpot_median_s")},
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "reps": len(rs),
        }
        for m, rs in runs.items()
        if rs
    }


def _fmt(v: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if v is None else f"{scale * v:.{digits}f}"


def workload_markdown(title: str, summary: dict[str, Any], rat: dict[str, Any], roof: dict[str, Any]) -> list[str]:
    """The tables of one workload: medians, per-repetition ratios, decode steps against the roofline."""
    lines = [
        f"### {title}",
        "",
        "| system | reps | tok/s | wall s | TTFT median s | TPOT median ms | peak RSS MB | pagedlab speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m, s in summary.items():
        r = rat.get(m)
        speedup = f"{r['median']:.2f}x" if r else "-"
        lines.append(
            f"| {m} | {s['reps']} | {_fmt(s['tok_per_s'])} | {_fmt(s['wall_s'])} | "
            f"{_fmt(s['ttft_median_s'], digits=2)} | {_fmt(s['tpot_median_s'], 1000, 0)} | "
            f"{s['peak_rss_mb']:.0f} | {speedup} |"
        )
    lines += ["", "| pagedlab / system | per repetition | min | median | max |", "|---|---|---:|---:|---:|"]
    for m, r in rat.items():
        lines.append(
            f"| {m} | {', '.join(f'{x:.2f}x' for x in r['per_rep'])} | {r['min']:.2f}x | "
            f"{r['median']:.2f}x | {r['max']:.2f}x |"
        )
    lines += [
        "",
        "| decode steps at batch >= 16 | steps | median batch | median step ms | roofline share "
        "(sum roofline / sum measured) | median per-step share | share per repetition |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for m, sh in roof.items():
        if sh:
            per = ", ".join("-" if x is None else f"{100 * x:.0f}%" for x in sh.get("per_rep_share", []))
            lines.append(
                f"| {m} | {sh['steps']} | {sh['median_batch']:.0f} | {sh['median_step_ms']:.0f} | "
                f"{100 * sh['share']:.0f}% | {100 * sh['median_step_share']:.0f}% | {per} |"
            )
    return lines + [""]


def markdown(result: dict[str, Any]) -> str:
    f, roofs = result["machine"], result["roofs"]
    mm = roofs["matmul"]
    at = [b for b in ("1", "16", "32") if b in mm]
    lines = [
        f"Machine: {f['cpu_model']}, {f['cpu_count']} cores, {f['torch_threads']} torch threads, "
        f"OMP_WAIT_POLICY={f['omp_wait_policy']}, torch {f['torch']}, Python {f['python']}; "
        f"load average {f['loadavg_1m']:.1f} at start; {f.get('bf16', '')}; every system in {f.get('dtype', 'float32')}.",
        f"Measured roofs (after each repetition; medians of {roofs.get('reps', 1)}), in {f.get('dtype', 'float32')}: "
        "copy bandwidth "
        f"{roofs['copy_bandwidth_Bps'] / 1e9:.1f} GB/s (read + write); "
        "matmul on the decode step's shapes "
        + ", ".join(f"{mm[b]['flops_per_s'] / 1e9:.0f} GFLOP/s at batch {b}" for b in at)
        + ".",
        "",
    ]
    if result["warnings"]:
        lines += ["**Busy machine, figures distorted:** " + "; ".join(result["warnings"]) + ".", ""]
    for name, title in (
        ("readme", "README workload (32 chat prompts, budgets 16-128)"),
        (
            "azure",
            "Azure conversation workload (128 requests, lengths / "
            f"{result['azure_scale']}, outputs <= {result['azure_max_out']})",
        ),
    ):
        if result["summary"].get(name):
            lines += workload_markdown(title, result["summary"][name], result["ratios"][name], result["roofline"][name])
    prof = result.get("scheduler_profile")
    if prof and prof.get("sched_share") is not None:
        lines.append(
            f"Scheduler + block management at 64 running sequences: {100 * prof['sched_share']:.1f}% "
            f"of step time ({prof['steps_with_64_running']} steps, median step "
            f"{prof['median_step_ms']:.0f} ms)."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="repetitions of hf_continuous and pagedlab (default 5)")
    ap.add_argument("--slow-reps", type=int, default=2, help="repetitions of hf_sequential, hf_static (default 2)")
    ap.add_argument("--azure-reps", type=int, default=1, help="repetitions of the Azure workload (0: skip)")
    ap.add_argument("--azure-scale", type=int, default=8)
    ap.add_argument("--azure-max-out", type=int, default=32)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--no-profile", action="store_true", help="skip the scheduler-share profile")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    ap.add_argument(
        "--dtype", choices=["float32", "bfloat16"], help="compute dtype of every system and the roofs (default float32)"
    )
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--workload", default="readme", help=argparse.SUPPRESS)
    ap.add_argument("--scale", type=int, default=8, help=argparse.SUPPRESS)
    ap.add_argument("--max-out", type=int, default=32, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.dtype:
        os.environ[ENV_DTYPE] = args.dtype  # the workers inherit it
    if args.worker:
        kind = args.worker[0]
        res = (
            profile_scheduler()
            if kind == "profile"
            else measure_roofs([int(b) for b in args.worker[1:]])
            if kind == "roofs"
            else run_mode(kind, args.workload, args.scale, args.max_out)
        )
        print(json.dumps(res))
        return 0
    if args.reps < 1 or args.slow_reps < 0 or args.azure_reps < 0:
        ap.error("--reps must be >= 1, --slow-reps and --azure-reps >= 0")
    facts = machine_facts()
    done = run_reps(args, args.modes.split(","))
    runs = done["runs"]
    roofs_by_rep = {c["rep"]: c["roofs"] for c in done["checks"]}
    result = {
        "machine": facts,
        "reps": args.reps,
        "slow_reps": args.slow_reps,
        "azure_reps": args.azure_reps,
        "azure_scale": args.azure_scale,
        "azure_max_out": args.azure_max_out,
        "checks": done["checks"],
        "warnings": busy_warnings(done["checks"], facts["cpu_count"] or 1),
        "roofs": median_roofs(list(roofs_by_rep.values())),
        "summary": {n: summarize(wl) for n, wl in runs.items()},
        "ratios": {n: ratios(wl) for n, wl in runs.items()},
        "roofline": {
            n: {
                m: roofline_share_by_rep([(r["decode_steps"], roofs_by_rep[r["rep"]]) for r in rs])
                for m, rs in wl.items()
                if rs
            }
            for n, wl in runs.items()
        },
        "scheduler_profile": None if args.no_profile else _worker(["profile"]),
        "runs": runs,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine_vs_hf.json").write_text(json.dumps(result, indent=1))
    text = markdown(result)
    (out / "engine_vs_hf.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
