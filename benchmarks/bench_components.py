"""Wall time of the engine built from the solutions' parts against the kit's engine (issue 10).

Run: ``python benchmarks/bench_components.py [--reps 3] [--max-tokens 16]``. Both engines serve the
capstone's prompts (greedy, chat-templated, submitted together) on SmolLM2-135M; the runs are
interleaved (kit, yours, kit, yours ...) so machine noise hits both alike. Prints the ratio of the
minimum and of the median wall times (target: <= 1.5) and checks the tokens are identical.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pagedlab import LLM, SamplingParams  # noqa: E402
from pagedlab.grading.capstone import CAPSTONE_PROMPTS  # noqa: E402
from pagedlab.grading.plug import solution_components  # noqa: E402


def serve(llm: LLM, prompts: list[str], max_tokens: int) -> tuple[float, list[list[int]]]:
    """Seconds to serve ``prompts`` on ``llm`` and the token ids it produced."""
    chats = [{"prompt_token_ids": llm.apply_chat_template([{"role": "user", "content": p}])} for p in prompts]
    t0 = time.perf_counter()
    outs = llm.generate(chats, SamplingParams(temperature=0, max_tokens=max_tokens))
    return time.perf_counter() - t0, [list(o.outputs[0].token_ids) for o in outs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()
    kw = {"num_gpu_blocks": 128, "max_model_len": 512, "seed": 0}
    engines = {"kit": LLM(**kw), "yours": LLM(components=solution_components(), **kw)}
    print(engines["yours"].llm_engine.components.table())
    times: dict[str, list[float]] = {"kit": [], "yours": []}
    tokens: dict[str, list[list[int]]] = {}
    for _ in range(args.reps):
        for name, llm in engines.items():
            dt, tokens[name] = serve(llm, CAPSTONE_PROMPTS, args.max_tokens)
            times[name].append(dt)
    for name, ts in times.items():
        print(f"{name:>5}: " + "  ".join(f"{t:.2f}s" for t in ts))
    r_min = min(times["yours"]) / min(times["kit"])
    r_med = statistics.median(times["yours"]) / statistics.median(times["kit"])
    same = tokens["kit"] == tokens["yours"]
    print(
        f"{len(CAPSTONE_PROMPTS)} prompts x {args.max_tokens} tokens: ratio yours/kit min {r_min:.2f}, "
        f"median {r_med:.2f} (target <= 1.5); tokens identical: {same}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
