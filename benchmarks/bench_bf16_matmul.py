"""The matmul roof of a decode step in float32 and bfloat16, with and without the CPU's bf16 instructions.

The four linears of one SmolLM2-135M layer (qkv 576->960, o 576->576, gate_up 576->3072, down 1536->576),
packed for oneDNN as the engine packs them (``pagedlab.model.cpu_linear.PackedLinear``), at batch 16 and 32:
GFLOP/s, best of 7 loops of 10. Each ISA setting runs in its own process with ``ONEDNN_MAX_CPU_ISA``:
the default (all the CPU has: AMX-BF16 / AVX512-BF16 where present), ``AVX512_CORE`` (AVX-512 without its bf16
instructions or AMX: a CPU without native bf16, oneDNN then emulates bf16 through fp32) and ``AVX2`` (where
oneDNN cannot pack bf16 at all: the engine then leaves the bf16 layers readable, ``F.linear``).

Usage:  python benchmarks/bench_bf16_matmul.py [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536)]
ISAS = ["", "AVX512_CORE", "AVX2"]


def worker() -> dict[str, float | str]:
    import torch

    from pagedlab.model.cpu_linear import PackedLinear

    torch.manual_seed(0)
    out: dict[str, float | str] = {}
    for dt in (torch.float32, torch.bfloat16):
        try:
            lins = [(PackedLinear((torch.randn(o, i) * 0.02).to(dt)), i) for o, i in SHAPES]
        except RuntimeError as e:
            out[str(dt)] = f"cannot pack: {str(e).splitlines()[0][:90]}"
            continue
        for b in (16, 32):
            xs = {i: torch.randn(b, i).to(dt) for _, i in lins}
            for _ in range(5):
                for lin, i in lins:
                    lin(xs[i])
            best = float("inf")
            for _ in range(7):
                t = time.perf_counter()
                for _ in range(10):
                    for lin, i in lins:
                        lin(xs[i])
                best = min(best, (time.perf_counter() - t) / 10)
            out[f"{dt} batch {b}"] = 2 * b * sum(o * i for o, i in SHAPES) / best / 1e9
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker()))
        return 0
    sys.path.insert(0, str(HERE.parent))
    from pagedlab.model.precision import bf16_summary

    rows = {}
    for isa in ISAS:
        env = {**os.environ, "ONEDNN_MAX_CPU_ISA": isa} if isa else dict(os.environ)
        p = subprocess.run([sys.executable, __file__, "--worker"], capture_output=True, text=True, env=env)
        rows[isa or "default (all the CPU has)"] = json.loads(p.stdout.strip().splitlines()[-1])
    keys = ["torch.float32 batch 16", "torch.float32 batch 32", "torch.bfloat16 batch 16", "torch.bfloat16 batch 32"]
    lines = [
        "# Decode-step matmuls: GFLOP/s in float32 and bfloat16, per oneDNN ISA",
        "",
        f"Command: `python benchmarks/bench_bf16_matmul.py`. Machine: {bf16_summary()}; {os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.1f} at the end (a shared machine: read the ratios).",
        "",
        "| ONEDNN_MAX_CPU_ISA | fp32 b16 | fp32 b32 | bf16 b16 | bf16 b32 |",
        "|---|---:|---:|---:|---:|",
    ]
    for isa, r in rows.items():
        cells = []
        for k in keys:
            v = r.get(k, r.get(k.rsplit(" batch", 1)[0], "-"))
            cells.append(f"{v:.0f}" if isinstance(v, float) else str(v))
        lines.append(f"| {isa} | " + " | ".join(cells) + " |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bf16_matmul.json").write_text(json.dumps(rows, indent=1))
    (out / "bf16_matmul.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
