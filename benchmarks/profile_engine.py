"""Where pagedlab's CPU time goes: a ``torch.profiler`` breakdown per op of the README workload.

Serves the workload of ``bench_engine.py`` (the 32 chat prompts of ``data/prompts.jsonl``, per-prompt
budgets, greedy, EOS ignored, all arriving at t = 0) once under ``torch.profiler`` and writes the
top ops by self CPU time, plus the share of wall time in prefill/mixed steps and pure-decode steps,
as a Markdown section. The profiler adds overhead per op: read shares, not absolute times.

Usage:  python benchmarks/profile_engine.py [--label before] [--backend torch] [--decode-only]
        [--out benchmarks/results/profile.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import ROOT, machine_facts, workload  # noqa: E402


def profile(backend: str | None, top: int, decode_only: bool = False) -> tuple[str, dict[str, float]]:
    """Serve the workload once under the profiler (``decode_only``: the prefill steps run before it starts,
    so only pure-decode steps, batch 32 down to 1, are profiled).

    Returns:
        (the profiler's op table as Markdown rows, step-time figures in seconds).
    """
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from pagedlab import LLM, SamplingParams

    prompts, budgets = workload()
    llm = LLM(num_gpu_blocks=512, max_num_seqs=32, max_num_batched_tokens=512, attention_backend=backend)
    eng = llm.llm_engine
    for p, b in zip(prompts, budgets):
        eng.add_request(None, {"prompt_token_ids": p}, SamplingParams(temperature=0, max_tokens=b, ignore_eos=True))
    while decode_only and (not eng.step_stats or eng.step_stats[-1].num_prefill_tokens):
        eng.step()
    first = len(eng.step_stats)
    t0 = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof, torch.inference_mode():
        while eng.has_unfinished_requests():
            eng.step()
    wall = time.perf_counter() - t0
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    rows = ["| op | calls | self CPU s | share |", "|---|---:|---:|---:|"]
    for e in events[:top]:
        rows.append(
            f"| `{e.key}` | {e.count} | {e.self_cpu_time_total / 1e6:.2f} | "
            f"{100 * e.self_cpu_time_total / total:.1f}% |"
        )
    stats = eng.step_stats[first:]
    decode = [s.step_time for s in stats if not s.num_prefill_tokens]
    figures = {
        "wall_s": wall,
        "steps": float(len(stats)),
        "decode_steps": float(len(decode)),
        "decode_s": sum(decode),
        "prefill_or_mixed_s": sum(s.step_time for s in stats) - sum(decode),
        "sched_s": sum(s.sched_time for s in stats),
    }
    return "\n".join(rows), figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default="current")
    ap.add_argument("--backend", default=None, help="attention backend (default: the engine's)")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--decode-only", action="store_true", help="profile only the pure-decode steps")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/profile.md"))
    args = ap.parse_args()
    table, f = profile(args.backend, args.top, args.decode_only)
    facts = machine_facts()
    section = [
        f"## {args.label}",
        "",
        f"Backend {args.backend or 'default'}{'; pure-decode steps only' if args.decode_only else ''}; {facts['cpu_count']} cores, {facts['torch_threads']} torch "
        f"threads, load average {facts['loadavg_1m']:.1f} at start. Wall {f['wall_s']:.1f} s under the "
        f"profiler over {f['steps']:.0f} steps: prefill/mixed steps {f['prefill_or_mixed_s']:.1f} s, "
        f"{f['decode_steps']:.0f} pure-decode steps {f['decode_s']:.1f} s, scheduler "
        f"{f['sched_s']:.2f} s.",
        "",
        table,
        "",
    ]
    out = Path(args.out)
    head = (
        "# Where pagedlab's CPU time goes (README workload, `torch.profiler`)\n\n"
        "`python benchmarks/profile_engine.py --label NAME` appends a section. Self CPU time per op, "
        "top ops; the profiler's overhead inflates small ops.\n\n"
    )
    old = out.read_text() if out.exists() else head
    out.write_text(old + "\n".join(section) + "\n")
    print("\n".join(section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
