"""pagedlab vs HF transformers on CPU: one fixed workload, four ways of serving it.

Workload: the 32 real chat prompts of ``data/prompts.jsonl`` (chat template applied), each with
its own output budget (16-128 tokens), greedy, EOS ignored so every system produces exactly
the same number of tokens, all requests arriving at t = 0.

Systems (each run in its own subprocess, so peak RSS is per system; modes interleaved within
each repetition, medians reported, as ../shared/reference/hf_baselines.md recommends):
  hf_sequential   ``model.generate`` one request at a time (batch 1)
  hf_static       one ``generate`` over all prompts, left padding, ``max_new_tokens`` = the
                  largest budget; outputs cut to each budget (useful tokens counted)
  hf_continuous   transformers' own continuous batching (``ContinuousBatchingManager``) with a
                  cache (48 pages x 256 = 12,288 tokens) and batch budget (512 tokens) comparable
                  to pagedlab's, the configuration that scored best in hf_baselines.md
  pagedlab        ``pagedlab.LLM``: 512 blocks x 16 = 8,192 tokens, max_num_batched_tokens 512

A second part profiles the scheduler + block management share of step time with 64 running
sequences (the 32 prompts twice).

Usage:  python benchmarks/bench_engine.py [--reps 3] [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ["hf_sequential", "hf_static", "hf_continuous", "pagedlab"]


def machine_facts() -> dict:
    """Cores, torch threads, OMP wait policy, load average, CPU model and torch version of this run."""
    import platform

    import torch
    model = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                  if l.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"), "loadavg_1m": os.getloadavg()[0],
            "cpu_model": model, "torch": torch.__version__, "python": platform.python_version()}


def workload():
    from pagedlab.model.loader import load_tokenizer
    tok = load_tokenizer()
    rows = [json.loads(l) for l in (ROOT / "data/prompts.jsonl").read_text().splitlines() if l.strip()]
    prompts = []
    for r in rows:
        ids = tok.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return prompts, [r["max_tokens"] for r in rows]


def hf_model():
    import torch
    from transformers import AutoModelForCausalLM
    from pagedlab.model.loader import _converted_dir, resolve_model_path, load_model
    load_model(None, tokenizer_only=True)                  # make sure the converted folder exists
    # The converted folder holds the GGUF's de-quantized fp32 weights with an HF config.
    return AutoModelForCausalLM.from_pretrained(_converted_dir(resolve_model_path(None)),
                                                dtype=torch.float32, attn_implementation="sdpa").eval()


class _Stamp:
    """A generate() streamer that records when each new token (batch row 0..B-1) appears."""

    def __init__(self):
        self.times, self.seen_prompt = [], False

    def put(self, value):
        if not self.seen_prompt:
            self.seen_prompt = True
            return
        self.times.append(time.perf_counter())

    def end(self):
        pass


def run_mode(mode: str) -> dict:
    import torch
    prompts, budgets = workload()
    ttft, tpot = [], []
    if mode == "pagedlab":
        from pagedlab import LLM, SamplingParams
        llm = LLM(num_gpu_blocks=512, max_num_seqs=32, max_num_batched_tokens=512)
        params = [SamplingParams(temperature=0, max_tokens=b, ignore_eos=True) for b in budgets]
        t0 = time.perf_counter()
        for p, sp in zip(prompts, params):
            llm.llm_engine.add_request(None, {"prompt_token_ids": p}, sp, arrival_time=t0)
        outs = llm._run([str(i) for i in range(len(prompts))], use_tqdm=False)
        wall = time.perf_counter() - t0
        tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        ttft = [o.metrics.ttft for o in outs]
        tpot = [o.metrics.tpot for o in outs if o.metrics.tpot is not None]
    else:
        model = hf_model()
        from transformers import GenerationConfig
        if mode == "hf_sequential":
            t0 = time.perf_counter()
            tokens = 0
            for p, b in zip(prompts, budgets):
                s = _Stamp()
                with torch.inference_mode():
                    out = model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                         do_sample=False, max_new_tokens=b, min_new_tokens=b, eos_token_id=-1,
                                         pad_token_id=2, streamer=s)
                tokens += out.shape[1] - len(p)
                ttft.append(s.times[0] - t0)
                if len(s.times) > 1:
                    tpot.append((s.times[-1] - s.times[0]) / (len(s.times) - 1))
            wall = time.perf_counter() - t0
        elif mode == "hf_static":
            L = max(len(p) for p in prompts)
            ids = torch.tensor([[2] * (L - len(p)) + p for p in prompts])
            mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts])
            s = _Stamp()
            t0 = time.perf_counter()
            with torch.inference_mode():
                model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=max(budgets),
                               min_new_tokens=max(budgets), eos_token_id=-1, pad_token_id=2, streamer=s)
            wall = time.perf_counter() - t0
            tokens = sum(budgets)                      # useful tokens; the rest is cut away
            ttft = [s.times[0] - t0] * len(prompts)
            tpot = [(s.times[b - 1] - s.times[0]) / (b - 1) for b in budgets if b > 1]
        elif mode == "hf_continuous":
            from transformers.generation import ContinuousBatchingConfig
            cbc = ContinuousBatchingConfig(num_blocks=48, max_batch_tokens=512, use_cuda_graph=False,
                                           auto_switch_to_flash=False, seed=0)
            gc = GenerationConfig(do_sample=False, max_new_tokens=max(budgets), eos_token_id=-1, pad_token_id=2)
            with model.continuous_batching_context_manager(generation_config=gc, continuous_batching_config=cbc,
                                                           block=True, timeout=30, warmup=False) as mgr:
                t0 = time.perf_counter()
                for i, (p, b) in enumerate(zip(prompts, budgets)):
                    mgr.add_request(p, request_id=f"r{i}", max_new_tokens=b, eos_token_id=-1, record_timestamps=True)
                results = {}
                while len(results) < len(prompts):
                    r = mgr.get_result(timeout=120)
                    if r is not None and r.is_finished():
                        results[r.request_id] = r
                wall = time.perf_counter() - t0
            tokens = sum(len(r.generated_tokens) for r in results.values())
            for r in results.values():
                ts = list(r.timestamps or [])
                if ts:
                    ttft.append(ts[0] - t0 if ts[0] > 1e6 or ts[0] >= t0 - 1 else ts[0])
                    if len(ts) > 1:
                        tpot.append((ts[-1] - ts[0]) / (len(ts) - 1))
        else:
            raise SystemExit(f"unknown mode {mode}")
    return {"mode": mode, "wall_s": wall, "tokens": tokens, "tok_per_s": tokens / wall,
            "ttft_median_s": statistics.median(ttft) if ttft else None,
            "tpot_median_s": statistics.median(tpot) if tpot else None,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def profile_scheduler() -> dict:
    """Share of step time spent in the scheduler + KV-cache manager with 64 running sequences."""
    from pagedlab import LLM, SamplingParams
    prompts, budgets = workload()
    llm = LLM(num_gpu_blocks=1024, max_num_seqs=64, max_num_batched_tokens=1024)
    for p in prompts * 2:
        llm.llm_engine.add_request(None, {"prompt_token_ids": p}, SamplingParams(temperature=0, max_tokens=48,
                                                                                 ignore_eos=True))
    eng = llm.llm_engine
    while eng.has_unfinished_requests():
        eng.step()
    at64 = [s for s in eng.step_stats if len(s.scheduled) == 64]
    step = sum(s.step_time for s in at64)
    sched = sum(s.sched_time for s in at64)
    return {"steps_with_64_running": len(at64), "step_time_s": step, "sched_time_s": sched,
            "sched_share": sched / step if step else None,
            "median_step_ms": 1000 * statistics.median(s.step_time for s in at64) if at64 else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "profile":
        print(json.dumps(profile_scheduler()))
        return 0
    if args.worker:
        print(json.dumps(run_mode(args.worker)))
        return 0
    modes = args.modes.split(",")
    runs = {m: [] for m in modes}
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for rep in range(args.reps):
        for m in modes:                               # interleaved within each repetition
            p = subprocess.run([sys.executable, __file__, "--worker", m], capture_output=True, text=True, env=env)
            if p.returncode:
                print(p.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"{m} failed")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            runs[m].append(r)
            print(f"rep {rep + 1}/{args.reps} {m:14s} {r['tok_per_s']:6.1f} tok/s  wall {r['wall_s']:6.1f} s", flush=True)
    prof = json.loads(subprocess.run([sys.executable, __file__, "--worker", "profile"], capture_output=True,
                                     text=True, env=env, check=True).stdout.strip().splitlines()[-1])
    med = lambda m, k: statistics.median(r[k] for r in runs[m] if r[k] is not None)
    summary = {m: {k: med(m, k) for k in ("tok_per_s", "wall_s", "ttft_median_s", "tpot_median_s", "peak_rss_mb")}
               for m in modes}
    import torch
    result = {"reps": args.reps, "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
              "runs": runs, "summary": summary, "scheduler_profile": prof}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine_vs_hf.json").write_text(json.dumps(result, indent=1))
    lines = ["| system | tok/s | wall s | TTFT median s | TPOT median ms | peak RSS MB | pagedlab speed-up |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    base = summary.get("pagedlab", {}).get("tok_per_s")
    for m in modes:
        s = summary[m]
        ratio = f"{base / s['tok_per_s']:.2f}x" if base and m != "pagedlab" else "-"
        lines.append(f"| {m} | {s['tok_per_s']:.1f} | {s['wall_s']:.1f} | {s['ttft_median_s']:.2f} | "
                     f"{1000 * s['tpot_median_s']:.0f} | {s['peak_rss_mb']:.0f} | {ratio} |")
    lines.append("")
    lines.append(f"Scheduler + block management at 64 running sequences: "
                 f"{100 * prof['sched_share']:.1f}% of step time "
                 f"({prof['steps_with_64_running']} steps, median step {prof['median_step_ms']:.0f} ms).")
    (out / "engine_vs_hf.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
