"""Wall time of the engine built from the solutions' parts against the kit's engine (issue 10).

Run: ``python benchmarks/bench_components.py [--reps 5] [--max-tokens 32]`` (``make bench`` runs it).
Both engines serve the capstone's prompts (lab 09: 8 real chat prompts, greedy, submitted together)
on SmolLM2-135M. One warm-up run each is discarded; then the repetitions are interleaved and their
order alternates (kit, yours / yours, kit ...) so machine noise hits both alike. Prints and writes
(``benchmarks/results/components.md`` / ``.json``) the per-repetition ratios yours / kit with their
min, median and max (target: <= 1.5), the solutions' engine's wall time (target: under a minute),
and checks the tokens are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_engine import machine_facts  # noqa: E402

from pagedlab import LLM, SamplingParams  # noqa: E402
from pagedlab.course.capstone import CAPSTONE_PROMPTS  # noqa: E402
from pagedlab.grading.plug import solution_components  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def serve(llm: LLM, prompts: list[str], max_tokens: int) -> tuple[float, list[list[int]]]:
    """Seconds to serve ``prompts`` on ``llm`` and the token ids it produced."""
    chats = [{"prompt_token_ids": llm.apply_chat_template([{"role": "user", "content": p}])} for p in prompts]
    t0 = time.perf_counter()
    outs = llm.generate(chats, SamplingParams(temperature=0, max_tokens=max_tokens), use_tqdm=False)
    return time.perf_counter() - t0, [list(o.outputs[0].token_ids) for o in outs]


def measure(engines: dict[str, LLM], reps: int, max_tokens: int) -> tuple[dict[str, list[float]], bool]:
    """Interleaved, alternating-order wall times per engine after one discarded warm-up each; whether
    every run of both engines produced the same tokens."""
    tokens: list[list[list[int]]] = [serve(llm, CAPSTONE_PROMPTS, max_tokens)[1] for llm in engines.values()]
    times: dict[str, list[float]] = {name: [] for name in engines}
    for rep in range(reps):
        order = list(engines) if rep % 2 == 0 else list(reversed(engines))
        for name in order:
            dt, toks = serve(engines[name], CAPSTONE_PROMPTS, max_tokens)
            times[name].append(dt)
            tokens.append(toks)
    return times, all(t == tokens[0] for t in tokens)


def summary(times: dict[str, list[float]]) -> dict[str, Any]:
    """Per-repetition ratios yours / kit and their min, median and max."""
    per_rep = [y / k for y, k in zip(times["yours"], times["kit"], strict=True)]
    return {
        "ratios": per_rep,
        "min": min(per_rep),
        "median": statistics.median(per_rep),
        "max": max(per_rep),
        "yours_median_s": statistics.median(times["yours"]),
        "kit_median_s": statistics.median(times["kit"]),
    }


def markdown(result: dict[str, Any]) -> str:
    """The results page: machine, command, the parts table, per-repetition ratios."""
    m, s = result["machine"], result["summary"]
    return "\n".join(
        [
            "# The engine on the solutions' parts vs the kit's engine (issue 10)",
            "",
            f"`{result['command']}`: {m['cpu_model']}, {m['cpu_count']} cores, {m['torch_threads']} torch threads, "
            f"OMP_WAIT_POLICY={m['omp_wait_policy']}, torch {m['torch']}; load average {m['loadavg_1m']:.1f} at start.",
            f"Workload: lab 09's {result['num_prompts']} capstone prompts x {result['max_tokens']} tokens, greedy, "
            "submitted together; one warm-up run each discarded; repetitions interleaved, order alternating.",
            "",
            "```",
            result["table"],
            "```",
            "",
            "| | per repetition | min | median | max |",
            "|---|---|---:|---:|---:|",
            f"| wall s, kit | {', '.join(f'{t:.2f}' for t in result['times']['kit'])} | "
            f"{min(result['times']['kit']):.2f} | {s['kit_median_s']:.2f} | {max(result['times']['kit']):.2f} |",
            f"| wall s, yours | {', '.join(f'{t:.2f}' for t in result['times']['yours'])} | "
            f"{min(result['times']['yours']):.2f} | {s['yours_median_s']:.2f} | {max(result['times']['yours']):.2f} |",
            f"| ratio yours / kit | {', '.join(f'{r:.2f}x' for r in s['ratios'])} | {s['min']:.2f}x | "
            f"{s['median']:.2f}x | {s['max']:.2f}x |",
            "",
            f"Tokens identical in every run: {result['tokens_identical']}. Target: ratio <= 1.5x, the solutions' "
            "engine under a minute.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for components.md / components.json")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.max_tokens < 1:
        ap.error("--reps and --max-tokens must be >= 1")
    machine = machine_facts()
    kw: dict[str, Any] = {"num_gpu_blocks": 128, "max_model_len": 512, "seed": 0}
    engines = {"kit": LLM(**kw), "yours": LLM(components=solution_components(), **kw)}
    table = engines["yours"].llm_engine.components.table()
    print(table)
    times, same = measure(engines, args.reps, args.max_tokens)
    result = {
        "command": "python benchmarks/bench_components.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine,
        "num_prompts": len(CAPSTONE_PROMPTS),
        "max_tokens": args.max_tokens,
        "table": table,
        "times": times,
        "summary": summary(times),
        "tokens_identical": same,
    }
    page = markdown(result)
    print(page)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "components.md").write_text(page)
    (args.out / "components.json").write_text(json.dumps(result, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    raise SystemExit(main())
