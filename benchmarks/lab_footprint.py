"""Peak kernel memory and run time of each lab, for sizing a JupyterHub (docs/instructor_guide.md).

Runs each notebook of ``solutions/`` once, one at a time, headless (nbclient, "Run All"), and samples the
kernel's process tree every 0.1 s with psutil (the peak of the summed RSS of the kernel and its children), and
reads the kernel's own exact peak at the end (``resource.getrusage(RUSAGE_SELF).ru_maxrss`` run in the kernel
by an extra last cell; ``RUSAGE_CHILDREN`` for its largest child): the figures an instructor needs to budget
memory per learner. Writes ``results/lab_footprint.json`` and ``results/lab_footprint.md``, or
``results/lab_footprint_vllm.*`` when real vLLM is installed (``make vllm``): then the labs' twin cells load the
model a second time in a vLLM child process. ``PAGEDLAB_VLLM_PYTHON=/nonexistent`` (or ``PAGEDLAB_LAB_VLLM=off``)
measures without it.

    python benchmarks/lab_footprint.py [--notebooks 00_welcome 03_copy_on_write] [--out benchmarks/results]

Run it on a quiet machine: run times on a shared CPU are inflated by whatever else runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any

import nbformat
import psutil
from nbclient import NotebookClient

from pagedlab.twin.labs import lab_vllm_status

ROOT = Path(__file__).resolve().parents[1]


def _tree_rss(proc: psutil.Process) -> int:
    """Summed RSS in bytes of ``proc`` and all its descendants (0 for processes that vanished)."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def run_one(path: Path, timeout_s: int) -> dict[str, float | str]:
    """Execute notebook ``path`` in a fresh kernel; return wall seconds and peak kernel RSS in MB."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_MAXRSS_CELL))
    client = NotebookClient(
        nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            km = client.km
            pid = getattr(getattr(km, "provisioner", None), "pid", None) if km is not None else None
            if pid:
                with contextlib.suppress(psutil.Error):
                    peak = max(peak, _tree_rss(psutil.Process(pid)))
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    sampler.start()
    try:
        client.execute()
    finally:
        stop.set()
        sampler.join()
    wall = round(time.perf_counter() - t0, 1)
    text = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []))
    fields = text.split()
    if len(fields) != 3 or fields[0] != "PAGEDLAB_MAXRSS":
        raise RuntimeError(f"{path.name}: the kernel did not report its peak RSS ({text!r})")
    self_kb, children_kb = int(fields[1]), int(fields[2])
    return {
        "notebook": path.stem,
        "wall_s": wall,
        "peak_rss_mb": round(peak / 2**20),
        "kernel_maxrss_mb": round(self_kb / 1024),
        "children_maxrss_mb": round(children_kb / 1024),
    }


#: The extra last cell: the kernel's exact peak RSS (Linux: kB) and its largest child's.
_MAXRSS_CELL = (
    "import resource as _r\n"
    "print('PAGEDLAB_MAXRSS', _r.getrusage(_r.RUSAGE_SELF).ru_maxrss, _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss)"
)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: measure the chosen notebooks (default: all of solutions/) and write the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebooks", nargs="*", default=None, help="stems in solutions/ (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--timeout", type=int, default=900, help="per-cell timeout in seconds")
    args = ap.parse_args(argv)
    paths = sorted((ROOT / "solutions").glob("*.ipynb"))
    if args.notebooks:
        paths = [p for p in paths if p.stem in set(args.notebooks)]
    # With real vLLM installed, labs 02, 04-07 and 09 also run their workload on it in a child process
    # (pagedlab.twin.labs): a second model in memory. The two cases are measured and kept apart.
    has_vllm, vllm_note = lab_vllm_status()
    stem = "lab_footprint_vllm" if has_vllm else "lab_footprint"
    print(f"real vLLM: {vllm_note}", flush=True)
    rows = []
    for p in paths:
        row = run_one(p, args.timeout)
        print(
            f"{row['notebook']:32s} {row['wall_s']:7.1f} s  kernel peak {row['kernel_maxrss_mb']:6d} MB"
            f"  sampled tree {row['peak_rss_mb']:6d} MB  child {row['children_maxrss_mb']:5d} MB",
            flush=True,
        )
        rows.append(row)
    meta = {
        "vllm": vllm_note,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps({"meta": meta, "labs": rows}, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(markdown_table(rows))
    print(f"wrote {args.out / stem}.json and .md")
    return 0


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The table of ``results/lab_footprint.md``, which docs/instructor_guide.md quotes verbatim."""
    lines = [
        "| lab | Run All (s) | kernel peak RSS (MB, getrusage) | kernel + children, sampled (MB) |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {r['notebook']} | {r['wall_s']} | {r['kernel_maxrss_mb']} | {r['peak_rss_mb']} |" for r in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
