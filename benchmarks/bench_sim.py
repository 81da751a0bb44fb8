"""GPU-scale simulation benchmarks (issue 4, item 3). Run: ``python benchmarks/bench_sim.py [--quick]``.

Everything here is the real ``Scheduler`` + ``KVCacheManager`` on a roofline clock
(``pagedlab.sim``), Llama-2-7B on one H100 unless stated:

1. Static vs continuous batching on an Azure 2023 conv slice, at the traced load, 10x the load
   and offline (all requests at once).
2. Chunked prefill on an Azure code slice: ``long_prefill_token_threshold`` 0 / 512 / 256 against
   the worst step time and the worst inter-token gap.
3. Preemption cost: recompute / swap time ratio and the crossover FLOP rate for 7B/13B/70B on
   A100-80G/H100/H200 (independent of the number of tokens).
4. Calibration: Vidur's measured Llama-2-7B linear layers / the roofline, on A100 and H100.

Writes ``benchmarks/results/sim.json`` and ``sim.md`` (or ``--out DIR``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pagedlab.config import SchedulerConfig  # noqa: E402
from pagedlab.sim import (  # noqa: E402
    A100_80G,
    H100,
    H200,
    LLAMA_2_7B,
    LLAMA_2_70B,
    LLAMA_13B,
    CostModel,
    format_table,
    load_azure,
    num_gpu_blocks,
    scale_for_cpu,
    simulate,
)

DATA = os.path.join(ROOT, "data")
KEYS = [
    "num_requests",
    "makespan",
    "output_throughput",
    "ttft_p50",
    "ttft_p99",
    "tpot_p50",
    "tpot_p99",
    "max_step_time",
    "num_preemptions",
    "kv_usage_mean",
]


def static_vs_continuous(n: int):
    trace = load_azure(os.path.join(DATA, "azure2023_AzureLLMInferenceTrace_conv.csv"), limit=n)
    rows = []
    for load, ts in (("traced", 1.0), ("10x", 0.1), ("offline", 0.0)):
        reqs = scale_for_cpu(trace, max_prompt=10**9, max_output=10**9, time_scale=ts)
        for sched in ("static", "continuous"):
            t = time.perf_counter()
            s = simulate(reqs, scheduling=sched, model=LLAMA_2_7B, hardware=H100).summary()
            rows.append(
                {
                    "load": load,
                    "scheduling": sched,
                    **{k: s.get(k) for k in KEYS},
                    "sim_wall_s": time.perf_counter() - t,
                }
            )
    return rows


def chunked_prefill(n: int):
    trace = load_azure(os.path.join(DATA, "azure2023_AzureLLMInferenceTrace_code.csv"), limit=n)
    rows = []
    for thr in (0, 512, 256):
        sc = SchedulerConfig(
            max_num_seqs=256, max_num_batched_tokens=16384, max_model_len=16384, long_prefill_token_threshold=thr
        )
        res = simulate(trace, sc, model=LLAMA_2_7B, hardware=H100)
        s = res.summary()
        rows.append(
            {
                "long_prefill_token_threshold": thr,
                **{k: s.get(k) for k in KEYS},
                "max_itl": max(r.max_itl or 0 for r in res.requests),
            }
        )
    return rows


def crossover():
    rows = []
    for gpu in (A100_80G, H100, H200):
        for model in (LLAMA_2_7B, LLAMA_13B, LLAMA_2_70B):
            g = gpu
            while True:
                try:
                    blocks = num_gpu_blocks(model, g)
                    break
                except ValueError:
                    g = gpu.times(g.num_gpus * 2)
            cm = CostModel(model, g)
            rows.append(
                {
                    "gpu": g.name,
                    "model": model.name,
                    "kv_bytes_per_token": model.kv_bytes_per_token,
                    "num_gpu_blocks": blocks,
                    "swap_ms_per_1k_tokens": cm.swap_time(1000) * 1e3,
                    "recompute_ms_per_1k_tokens": cm.recompute_time(1000) * 1e3,
                    "recompute_over_swap": cm.recompute_over_swap(),
                    "crossover_tflops": cm.crossover_flops_per_s() / 1e12,
                }
            )
    return rows


def calibration():
    rows = []
    for gpu, name in ((A100_80G, "a100"), (H100, "h100")):
        cm = CostModel(LLAMA_2_7B, gpu)
        path = os.path.join(DATA, f"vidur_{name}_Llama-2-7b-hf_mlp.csv")
        for r in csv.DictReader(Path(path).read_text().splitlines()):
            t = int(r["num_tokens"])
            if r["num_tensor_parallel_workers"] != "1" or t not in (1, 16, 64, 256, 1024, 4096):
                continue
            measured = sum(float(r[f"time_stats.{op}.median"]) for op, _, _ in cm.linear_ops()) / 1e3
            rows.append(
                {
                    "gpu": gpu.name,
                    "num_tokens": t,
                    "vidur_ms": measured * 1e3,
                    "roofline_ms": cm.linear_layer_time(t) * 1e3,
                    "ratio": measured / cm.linear_layer_time(t),
                }
            )
    # Some token counts appear twice in Vidur's file: keep the first.
    seen, out = set(), []
    for r in rows:
        if (r["gpu"], r["num_tokens"]) not in seen:
            seen.add((r["gpu"], r["num_tokens"]))
            out.append(r)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller slices")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = ap.parse_args()
    n_conv, n_code = (200, 100) if args.quick else (1000, 500)
    t0 = time.perf_counter()
    results = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "command": "python benchmarks/bench_sim.py" + (" --quick" if args.quick else ""),
        "static_vs_continuous": {
            "trace": f"azure conv, first {n_conv} requests",
            "model": "llama-2-7b",
            "gpu": "H100",
            "rows": static_vs_continuous(n_conv),
        },
        "chunked_prefill": {
            "trace": f"azure code, first {n_code} requests",
            "model": "llama-2-7b",
            "gpu": "H100",
            "rows": chunked_prefill(n_code),
        },
        "swap_vs_recompute": crossover(),
        "vidur_calibration": calibration(),
    }
    results["wall_s"] = time.perf_counter() - t0
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sim.json"), "w") as f:
        json.dump(results, f, indent=2)
    md = [
        f"# Simulator benchmarks\n\n`{results['command']}` ({results['wall_s']:.0f} s)\n",
        f"## Static vs continuous batching ({results['static_vs_continuous']['trace']}, Llama-2-7B, H100)\n",
        format_table(results["static_vs_continuous"]["rows"]),
        f"\n## Chunked prefill ({results['chunked_prefill']['trace']}, Llama-2-7B, H100)\n",
        format_table(results["chunked_prefill"]["rows"]),
        "\n## Swap vs recompute (ratio independent of the token count)\n",
        format_table(results["swap_vs_recompute"]),
        "\n## Roofline vs Vidur's measured linear layers (Llama-2-7B, one layer)\n",
        format_table(results["vidur_calibration"]),
    ]
    text = "\n".join(md) + "\n"
    with open(os.path.join(args.out, "sim.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
