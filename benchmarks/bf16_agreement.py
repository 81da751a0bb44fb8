"""How often the kit's greedy tokens equal HF transformers' in each dtype, on the README's 32 held prompts.

For each dtype (float32, bfloat16) the kit serves ``data/prompts.jsonl`` (chat template, greedy, each prompt's
``max_tokens``, EOS ignored, all at once, block 32) and HF ``generate`` runs each prompt alone in the same
dtype (``AutoModelForCausalLM.from_pretrained(..., dtype=...)`` on the same GGUF). "Identical" means the whole
greedy sequence is the same token for token; for the others the first position where they part is given.
In float32 both compute with fp32 sums in different orders and agree on every prompt
(tests/engine/test_hf_parity.py); in bfloat16 every matmul output, the RMSNorm outputs and the residual
stream are rounded to 8 bits of mantissa, and two implementations that add in different orders (oneDNN's
fused residual add, SDPA vs the C kernel) round differently now and then: a near-tie between the two most
likely tokens can then go the other way, and the sequences part from there.

Usage:  python benchmarks/bf16_agreement.py [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first position where ``a`` and ``b`` differ (the shorter length when one is a prefix), or None."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def hf_greedy(prompts: list[list[int]], budgets: list[int], dtype: torch.dtype) -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    from pagedlab.model.fetch import ensure_model

    gguf = Path(ensure_model())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # de-quantized to fp32, then rounded to ``dtype`` (as the kit's copy is made)
        hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype).eval()
    hf.generation_config.eos_token_id = None  # EOS ignored as the engines' ignore_eos: it may be picked, then go on
    out = []
    for ids, n in zip(prompts, budgets):
        with torch.inference_mode():
            gen = hf.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                do_sample=False,
                max_new_tokens=n,
                pad_token_id=2,
            )
        out.append(gen[0, len(ids) :].tolist())
    return out


def kit_greedy(prompts: list[list[int]], budgets: list[int], dtype: str) -> list[list[int]]:
    from pagedlab import LLM, SamplingParams

    llm = LLM(dtype=dtype, block_size=32, num_gpu_blocks_override=257, enable_prefix_caching=False)
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in budgets]
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    import bench_engine

    from pagedlab.model.precision import bf16_summary

    prompts, budgets = bench_engine.workload("readme")
    rows: dict[str, Any] = {}
    for name in args.dtypes.split(","):
        dt = getattr(torch, name)
        t0 = time.perf_counter()
        kit, hf = kit_greedy(prompts, budgets, name), hf_greedy(prompts, budgets, dt)
        diffs = [first_difference(a, b) for a, b in zip(kit, hf)]
        rows[name] = {
            "identical": sum(d is None for d in diffs),
            "first_difference": diffs,
            "tokens_before_first_difference": sum(d if d is not None else len(a) for d, a in zip(diffs, kit)),
            "tokens": sum(len(a) for a in kit),
            "kit_token_ids": kit,
            "seconds": time.perf_counter() - t0,
        }
        print(f"{name}: {rows[name]['identical']}/{len(prompts)} identical to HF {name}", flush=True)
    result = {
        "command": " ".join(["python benchmarks/bf16_agreement.py", *(argv or sys.argv[1:])]),
        "machine": bf16_summary(),
        "num_prompts": len(prompts),
        "rows": rows,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bf16_agreement.json").write_text(json.dumps(result, indent=1))
    lines = [
        "# Greedy tokens: the kit vs HF transformers, per dtype",
        "",
        f"Command: `{result['command']}`. Machine: {result['machine']}.",
        "",
        "| dtype | identical sequences | tokens before the first difference | first differences (prompt: position) |",
        "|---|---:|---:|---|",
    ]
    for name, r in rows.items():
        parts = ", ".join(f"{i}: {d}" for i, d in enumerate(r["first_difference"]) if d is not None) or "none"
        lines.append(
            f"| {name} | {r['identical']}/{len(prompts)} | {r['tokens_before_first_difference']}/{r['tokens']} | {parts} |"
        )
    (out / "bf16_agreement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
