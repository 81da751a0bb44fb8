#!/usr/bin/env python
"""Benchmark the Triton paged-attention kernels on a CUDA GPU (about 3-5 minutes on one GPU).

What it does, in order:
 1. Correctness first: a matrix of small cases (GQA ratios, head sizes 64/80/96/128, partial blocks,
    shuffled tables, split-KV, chunked prefill) against the PyTorch reference. Any failure stops
    the run before timing (exit code 1).
 2. Achievable memory bandwidth: ``y.copy_(x)`` on a 2 GiB buffer (read + write bytes / time).
 3. Decode: latency (median, p10, p90) of the Triton kernel (single pass and split-KV with the
    ``choose_num_splits`` heuristic), ``F.scaled_dot_product_attention`` on pre-gathered contiguous KV
    (the no-paging bound) and gather + SDPA (naive paging); achieved bandwidth = bytes of K, V, Q, O
    and the block table / latency, as a share of the copy bandwidth. Two cases also sweep
    BLOCK_N x num_warps of the single-pass kernel, to tune the defaults.
 4. Prefill / extend: TFLOP/s = 4 * Hq * D * (unmasked q-k pairs) / time, same baselines.
 5. Writes ``benchmarks/results/paged_attention_<gpu>.json`` and prints a Markdown table for the README.

Targets (issue 7, H200): decode >= 70% of copy bandwidth at context >= 2k; within 1.2x of SDPA on
pre-gathered KV. ``--dry-run`` runs the same code paths on CPU under the Triton interpreter with tiny
shapes (for the test suite); it says nothing about speed.

Usage::

    python benchmarks/bench_paged_attention.py            # on a CUDA machine, TRITON_INTERPRET unset
    python benchmarks/bench_paged_attention.py --quick    # fewer cases (~1-2 min)
    python benchmarks/bench_paged_attention.py --dry-run --out /tmp/bench.json   # CPU, interpreter
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Benchmark pagedlab's Triton paged-attention kernels.")
    p.add_argument(
        "--dry-run", action="store_true", help="tiny shapes on CPU under TRITON_INTERPRET=1 (no timing value)"
    )
    p.add_argument("--quick", action="store_true", help="fewer cases")
    p.add_argument(
        "--out", type=Path, default=None, help="JSON path (default benchmarks/results/paged_attention_<gpu>.json)"
    )
    p.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------
def decode_cases(args):
    """(name, Hq, Hkv, D, block_size, batch, ctx)."""
    if args.dry_run:
        return [("smollm2", 9, 3, 64, 16, 2, 40)]
    cases = [
        ("llama3-8b", 32, 8, 128, 16, b, c)
        for b, c in [(1, 2048), (1, 32768), (8, 2048), (8, 8192), (32, 2048), (32, 8192), (128, 2048), (128, 8192)]
    ]
    cases += [("smollm2", 9, 3, 64, 16, b, c) for b, c in [(1, 2048), (32, 2048), (128, 2048), (64, 8192)]]
    cases += [("llama3-8b-bs32", 32, 8, 128, 32, 32, 8192)]
    if args.quick:
        cases = [c for c in cases if (c[5], c[6]) in {(1, 32768), (8, 8192), (32, 2048), (128, 8192), (64, 8192)}]
    return cases


#: Decode cases that also get a BLOCK_N x num_warps sweep of the single-pass kernel.
SWEEP_CASES = {("llama3-8b", 8, 8192), ("smollm2", 32, 2048)}


def prefill_cases(args):
    """(name, Hq, Hkv, D, block_size, batch, q_len, context_len)."""
    if args.dry_run:
        return [("smollm2", 9, 3, 64, 16, 2, 12, 7)]
    cases = [
        ("llama3-8b", 32, 8, 128, 16, 1, 4096, 0),
        ("llama3-8b", 32, 8, 128, 16, 4, 1024, 1024),
        ("llama3-8b", 32, 8, 128, 16, 8, 512, 0),
        ("llama3-8b", 32, 8, 128, 16, 1, 2048, 6144),
        ("smollm2", 9, 3, 64, 16, 4, 1024, 0),
    ]
    return cases[:3] if args.quick else cases


# ---------------------------------------------------------------------------------------------
# Timing helpers: triton.testing on CUDA (CUDA graphs when they capture), a plain loop on CPU.
# ---------------------------------------------------------------------------------------------
def bench(fn, device: str, use_graph: bool = True) -> dict:
    """Latency in microseconds: median, p10, p90."""
    if device != "cuda":
        times = []  # CPU (dry run): one timed call, the numbers mean nothing
        for _ in range(1):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        return dict(us=statistics.median(times), us_p10=min(times), us_p90=max(times), timer="perf_counter")
    import triton.testing as tt

    if use_graph:
        try:
            p10, p50, p90 = tt.do_bench_cudagraph(fn, rep=50, quantiles=[0.1, 0.5, 0.9])
            return dict(us=p50 * 1e3, us_p10=p10 * 1e3, us_p90=p90 * 1e3, timer="do_bench_cudagraph")
        except Exception as exc:  # not capturable (host sync): fall back
            print(f"    (cuda graph capture failed: {type(exc).__name__}; using do_bench)")
            torch.cuda.synchronize()
    p10, p50, p90 = tt.do_bench(fn, warmup=25, rep=100, quantiles=[0.1, 0.5, 0.9])
    return dict(us=p50 * 1e3, us_p10=p10 * 1e3, us_p90=p90 * 1e3, timer="do_bench")


def copy_bandwidth(device: str, dry_run: bool) -> float:
    """Achievable bytes/s of a large device copy (read + write)."""
    numel = (1 << 16) if dry_run else (1 << 30)  # 2 GiB of fp16 on the GPU
    x = torch.empty(numel, dtype=torch.float16, device=device).normal_()
    y = torch.empty_like(x)
    t = bench(lambda: y.copy_(x), device, use_graph=False)
    return 2 * x.numel() * x.element_size() / (t["us"] * 1e-6)


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
def make_paged(batch, ctx_lens, hkv, d, block_size, dtype, device, gen):
    """A paged cache holding ``batch`` sequences with a shuffled block table; also the contiguous K/V."""
    blocks = [-(-n // block_size) for n in ctx_lens]
    num_blocks = sum(blocks) + 1
    kc = torch.randn(num_blocks, block_size, hkv, d, dtype=dtype, device=device, generator=gen)
    vc = torch.randn(num_blocks, block_size, hkv, d, dtype=dtype, device=device, generator=gen)
    perm = torch.randperm(num_blocks, device="cpu")
    table = torch.zeros(batch, max(blocks), dtype=torch.int32)
    start = 0
    for s, n in enumerate(blocks):
        table[s, :n] = perm[start : start + n].to(torch.int32)
        start += n
    return kc, vc, table.to(device)


def gather_contiguous(cache, table, ctx_len):
    """[B, Hkv, ctx, D] contiguous copy of equal-length sequences (the 'gather' of gather + SDPA)."""
    b = table.shape[0]
    n = -(-ctx_len // cache.shape[1])
    g = cache.index_select(0, table[:, :n].reshape(-1).long())
    return g.view(b, n * cache.shape[1], *cache.shape[2:])[:, :ctx_len].transpose(1, 2)


# ---------------------------------------------------------------------------------------------
# 1. Correctness
# ---------------------------------------------------------------------------------------------
def correctness(device, dtype, ops, reference, testing, dry_run) -> list:
    """Small varied cases against the reference; returns records with max errors."""
    recs = []
    tol = testing.TOLERANCE[dtype]
    # (Hq, Hkv, D, block_size, seq_lens, num_splits)
    cases = [
        (9, 3, 64, 16, [1, 15, 16, 17, 31, 100], 1),
        (12, 2, 96, 1, [3, 40], 2),
        (32, 8, 128, 16, [1, 17, 300], 4),
        (8, 1, 80, 32, [5, 64, 65], 1),
        (8, 8, 64, 16, [2, 33], 8),
        (32, 1, 128, 16, [7, 129], 1),
    ]
    if dry_run:
        cases = [(9, 3, 64, 16, [1, 17, 40], 2)]
    for hq, hkv, d, bs, lens, splits in cases:
        c = testing.PagedCase(lens, hkv, d, bs, dtype, device=device)
        q = torch.randn(len(lens), hq, d, device="cpu").to(dtype).to(device)
        out = ops.paged_decode_attention(q, c.kv(), d**-0.5, num_splits=splits)
        ref = reference.paged_decode_attention(q, c.kv(clean=True), d**-0.5)
        err = (out.float() - ref.float()).abs().max().item()
        ok = bool(torch.allclose(out.float(), ref.float(), atol=tol[0], rtol=tol[1]))
        recs.append(
            dict(
                kind="decode",
                heads=f"{hq}/{hkv}",
                head_dim=d,
                block_size=bs,
                seq_lens=lens,
                num_splits=splits,
                max_abs_err=err,
                ok=ok,
            )
        )
        q_lens = [max(1, n // 2) for n in lens]
        q = torch.randn(sum(q_lens), hq, d, device="cpu").to(dtype).to(device)
        cu = testing.PagedCase.cu_seqlens(q_lens, device=device)
        out = ops.paged_prefill_attention(q, c.kv(cu), d**-0.5)
        ref = reference.paged_prefill_attention(q, c.kv(cu, clean=True), d**-0.5)
        err = (out.float() - ref.float()).abs().max().item()
        ok = bool(torch.allclose(out.float(), ref.float(), atol=tol[0], rtol=tol[1]))
        recs.append(
            dict(
                kind="prefill",
                heads=f"{hq}/{hkv}",
                head_dim=d,
                block_size=bs,
                seq_lens=lens,
                q_lens=q_lens,
                max_abs_err=err,
                ok=ok,
            )
        )
    return recs


# ---------------------------------------------------------------------------------------------
# 3. Decode
# ---------------------------------------------------------------------------------------------
def run_decode(case, dtype, device, peak, ops, num_sms, gen, sweep=()) -> list:
    name, hq, hkv, d, bs, batch, ctx = case
    kc, vc, table = make_paged(batch, [ctx] * batch, hkv, d, bs, dtype, device, gen)
    lens = torch.full((batch,), ctx, dtype=torch.int32, device=device)
    q = torch.randn(batch, hq, d, dtype=dtype, device=device, generator=gen)
    scale = d**-0.5
    k_c, v_c = gather_contiguous(kc, table, ctx).contiguous(), gather_contiguous(vc, table, ctx).contiguous()
    q4 = q.unsqueeze(2)  # [B, Hq, 1, D]
    splits = ops.choose_num_splits(batch, hkv, ctx, num_sms) if device == "cuda" else 2
    kv = ops.PagedKV(kc, vc, table, lens)
    ops.validate_decode_inputs(q, kv, scale)  # once, outside the timed calls
    impls = {
        "triton": lambda: ops.paged_decode_attention(q, kv, scale, check_values=False),
        f"triton_split{splits}": lambda: ops.paged_decode_attention(
            q, kv, scale, num_splits=splits, check_values=False
        ),
        "sdpa_pregathered": lambda: F.scaled_dot_product_attention(q4, k_c, v_c, scale=scale, enable_gqa=True),
        "gather+sdpa": lambda: F.scaled_dot_product_attention(
            q4, gather_contiguous(kc, table, ctx), gather_contiguous(vc, table, ctx), scale=scale, enable_gqa=True
        ),
    }
    # SDPA may not take its fastest (flash) path with enable_gqa; K/V expanded to Hq heads beforehand
    # is the other no-paging bound (it reads group x more bytes). Skipped when it would not fit easily.
    if k_c.numel() * k_c.element_size() * (hq // hkv) * 2 < 8 * 2**30:
        k_x, v_x = k_c.repeat_interleave(hq // hkv, dim=1), v_c.repeat_interleave(hq // hkv, dim=1)
        impls["sdpa_pregathered_expanded"] = lambda: F.scaled_dot_product_attention(q4, k_x, v_x, scale=scale)
    # Tuning sweep (single pass): tile size x warps, to pick better defaults later.
    for block_n, warps in sweep:
        impls[f"triton_bn{block_n}_w{warps}"] = lambda bn=block_n, w=warps: ops.paged_decode_attention(
            q, kv, scale, block_n=bn, num_warps=w, check_values=False
        )
    expect = F.scaled_dot_product_attention(q4.float(), k_c.float(), v_c.float(), scale=scale, enable_gqa=True).squeeze(
        2
    )
    elem = kc.element_size()
    nbytes = batch * ctx * hkv * d * 2 * elem + 2 * q.numel() * elem + table.numel() * 4
    recs = []
    for impl, fn in impls.items():
        out = fn()
        out = out.squeeze(2) if out.dim() == 4 else out
        err = (out.float() - expect).abs().max().item()
        t = bench(fn, device)
        bw = nbytes / (t["us"] * 1e-6)
        recs.append(
            dict(
                kind="decode",
                case=name,
                Hq=hq,
                Hkv=hkv,
                D=d,
                block_size=bs,
                batch=batch,
                ctx=ctx,
                impl=impl,
                max_abs_err=err,
                bytes=nbytes,
                GBps=bw / 1e9,
                pct_of_copy=100 * bw / peak,
                **t,
            )
        )
        print(
            f"  decode {name:15s} B={batch:<4d} ctx={ctx:<6d} {impl:26s} {t['us']:9.1f} us "
            f"{bw / 1e9:8.1f} GB/s {100 * bw / peak:5.1f}% of copy  err={err:.1e}"
        )
    impls.clear()  # free the expanded copies
    return recs


# ---------------------------------------------------------------------------------------------
# 4. Prefill
# ---------------------------------------------------------------------------------------------
def run_prefill(case, dtype, device, ops, gen) -> list:
    name, hq, hkv, d, bs, batch, q_len, ctx_len = case
    seq_len = ctx_len + q_len
    kc, vc, table = make_paged(batch, [seq_len] * batch, hkv, d, bs, dtype, device, gen)
    lens = torch.full((batch,), seq_len, dtype=torch.int32, device=device)
    cu = torch.arange(0, (batch + 1) * q_len, q_len, dtype=torch.int32, device=device)
    q = torch.randn(batch * q_len, hq, d, dtype=dtype, device=device, generator=gen)
    scale = d**-0.5
    k_c, v_c = gather_contiguous(kc, table, seq_len).contiguous(), gather_contiguous(vc, table, seq_len).contiguous()
    q4 = q.view(batch, q_len, hq, d).transpose(1, 2)  # [B, Hq, q, D]
    # Causal with a context offset: query i sees keys 0 .. ctx_len + i (a bottom-right aligned mask).
    mask = torch.arange(seq_len, device=device)[None, :] <= ctx_len + torch.arange(q_len, device=device)[:, None]
    kv = ops.PagedKV(kc, vc, table, lens, cu)
    ops.validate_prefill_inputs(q, kv, scale)

    def sdpa(k, v):
        if ctx_len == 0:
            return F.scaled_dot_product_attention(q4, k, v, is_causal=True, scale=scale, enable_gqa=True)
        return F.scaled_dot_product_attention(q4, k, v, attn_mask=mask, scale=scale, enable_gqa=True)

    impls = {
        "triton": lambda: ops.paged_prefill_attention(q, kv, scale, max_query_len=q_len, check_values=False),
        "sdpa_pregathered": lambda: sdpa(k_c, v_c),
        "gather+sdpa": lambda: sdpa(gather_contiguous(kc, table, seq_len), gather_contiguous(vc, table, seq_len)),
    }
    pairs = batch * (q_len * ctx_len + q_len * (q_len + 1) // 2)
    flops = 4 * hq * d * pairs
    expect = impls["sdpa_pregathered"]().transpose(1, 2).reshape(batch * q_len, hq, d).float()
    recs = []
    for impl, fn in impls.items():
        out = fn()
        out = out.transpose(1, 2).reshape(batch * q_len, hq, d) if out.dim() == 4 else out
        err = (out.float() - expect).abs().max().item()
        t = bench(fn, device)
        tflops = flops / (t["us"] * 1e-6) / 1e12
        recs.append(
            dict(
                kind="prefill",
                case=name,
                Hq=hq,
                Hkv=hkv,
                D=d,
                block_size=bs,
                batch=batch,
                q_len=q_len,
                ctx=ctx_len,
                impl=impl,
                max_abs_err=err,
                flops=flops,
                TFLOPs=tflops,
                **t,
            )
        )
        print(
            f"  prefill {name:14s} B={batch:<3d} q={q_len:<5d} ctx={ctx_len:<5d} {impl:18s} {t['us']:10.1f} us "
            f"{tflops:7.1f} TFLOP/s  err={err:.1e}"
        )
    return recs


def markdown_table(records) -> str:
    rows = [
        "| kind | case | batch | ctx | q_len | impl | latency (us) | GB/s | % of copy | TFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        rows.append(
            f"| {r['kind']} | {r['case']} | {r['batch']} | {r['ctx']} | {r.get('q_len', 1)} | {r['impl']} | "
            f"{r['us']:.1f} | {r.get('GBps', float('nan')):.0f} | {r.get('pct_of_copy', float('nan')):.0f} | "
            f"{r.get('TFLOPs', float('nan')):.1f} |"
        )
    return "\n".join(rows)


def main(argv=None) -> int:  # noqa: C901 - one branch per command-line option
    args = parse_args(argv)
    has_cuda = torch.cuda.is_available()
    if args.dry_run:
        if not has_cuda:
            # Must happen before triton is first imported (its own library is decorated at import).
            os.environ.setdefault("TRITON_INTERPRET", "1")
        device = "cuda" if has_cuda and os.environ.get("TRITON_INTERPRET", "0") in ("", "0") else "cpu"
    else:
        if not has_cuda:
            print(
                "bench_paged_attention: no CUDA device found. This benchmark measures GPU kernels; run it on a "
                "machine with an NVIDIA GPU, or use --dry-run to check the script on CPU.",
                file=sys.stderr,
            )
            return 2
        if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
            print(
                "bench_paged_attention: TRITON_INTERPRET is set, so the kernels would run in the CPU interpreter; "
                "unset it to benchmark the GPU.",
                file=sys.stderr,
            )
            return 2
        device = "cuda"

    import triton  # after the variable is set

    from pagedlab.kernels import ops, reference, testing

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    gpu = torch.cuda.get_device_name() if device == "cuda" else "dryrun-cpu"
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else 4
    tag = re.sub(r"[^a-z0-9]+", "_", gpu.lower()).strip("_")
    out_path = args.out or RESULTS_DIR / f"paged_attention_{tag}.json"
    t_start = time.time()
    print(
        f"pagedlab paged-attention benchmark on {gpu} (triton {triton.__version__}, torch {torch.__version__}, "
        f"{args.dtype}{', dry run' if args.dry_run else ''})"
    )

    print("1. correctness against the reference")
    checks = correctness(device, dtype, ops, reference, testing, args.dry_run)
    bad = [c for c in checks if not c["ok"]]
    for c in checks:
        print(
            f"  {c['kind']:8s} heads {c['heads']:5s} D={c['head_dim']:<4d} bs={c['block_size']:<3d} "
            f"err={c['max_abs_err']:.1e} {'ok' if c['ok'] else 'FAIL'}"
        )
    result = dict(
        gpu=gpu,
        device=device,
        dtype=args.dtype,
        triton=triton.__version__,
        torch=torch.__version__,
        python=platform.python_version(),
        dry_run=args.dry_run,
        correctness=checks,
        records=[],
    )
    if bad:
        print(f"correctness FAILED in {len(bad)} case(s); no timing done", file=sys.stderr)
        _write(out_path, result)
        return 1

    print("2. copy bandwidth")
    peak = copy_bandwidth(device, args.dry_run)
    result["copy_GBps"] = peak / 1e9
    print(f"  y.copy_(x): {peak / 1e9:.1f} GB/s")

    gen = torch.Generator(device=device).manual_seed(0)
    print("3. decode")
    for i, case in enumerate(decode_cases(args)):
        sweep = ()
        if args.dry_run and i == 0:
            sweep = ((16, 4), (32, 2))
        elif not args.dry_run and not args.quick and (case[0], case[5], case[6]) in SWEEP_CASES:
            sweep = tuple((bn, w) for bn in (32, 64, 128) for w in (2, 4, 8))
        result["records"] += run_decode(case, dtype, device, peak, ops, num_sms, gen, sweep)
    print("4. prefill")
    for case in prefill_cases(args):
        result["records"] += run_prefill(case, dtype, device, ops, gen)
    result["seconds"] = round(time.time() - t_start, 1)
    table = markdown_table(result["records"])
    result["markdown"] = table
    _write(out_path, result)
    print(table)
    print(f"wrote {out_path} in {result['seconds']} s")
    return 0


def _write(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.exit(main())
