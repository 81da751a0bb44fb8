"""How long each exercise's ``check()`` takes on its solution, and what its differential test draws (issue 39).

Run: ``python benchmarks/bench_checks.py [--reps 5] [--only 02.free_queue]`` (``make bench`` runs it).
Each repetition starts a fresh interpreter per exercise (imports not timed) and times two ``check()`` calls
on the solution cell's object: the *first* (what a learner waits for: it draws the differential cases and
runs the reference once) and a *second* (cases and reference transcripts cached). Repetitions go through
the exercises in alternating order. Writes ``benchmarks/results/checks.md`` / ``.json`` with, per
exercise, the cases drawn, the min and median seconds of both calls, and the machine (target: the whole
first check well under 2 s on 2 cores; the Triton exercise runs under Triton's CPU interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_engine import machine_facts  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"

_ONE = """
import json, sys, time
from pagedlab.grading import differential, registry
from pagedlab.grading.checking import check
eid = sys.argv[1]
ex = registry.get(eid)
obj = registry.snippet_object(eid)
times = []
for _ in range(2):
    t0 = time.perf_counter()
    res = check(obj, eid, show=False)
    times.append(time.perf_counter() - t0)
    assert res.passed, res.text()
d = differential.find(eid)
print(json.dumps({"first": times[0], "second": times[1], "tests": len(ex.public_tests()),
                  "cases": d.examples if d else 0, "drawn": len(d.cases()) if d else 0, "draws": d.draws if d else ""}))
"""


def one(eid: str) -> dict[str, Any]:
    # as the labs' first cell: Triton's interpreter on (no GPU here), before anything imports triton
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _ONE, eid], capture_output=True, text=True, cwd=ROOT, timeout=600, check=False, env=env
    )
    if out.returncode:
        raise SystemExit(f"{eid}: check() failed on the solution:\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", action="append", help="exercise id (repeatable)")
    args = ap.parse_args()
    from pagedlab.grading import registry

    ids = args.only or [ex.id for ex in registry.all_exercises()]
    facts = machine_facts()
    runs: dict[str, list[dict[str, Any]]] = {eid: [] for eid in ids}
    for rep in range(args.reps):
        for eid in ids if rep % 2 == 0 else ids[::-1]:
            runs[eid].append(one(eid))
            print(f"rep {rep + 1} {eid}: first {runs[eid][-1]['first']:.2f} s", flush=True)
    rows = []
    for eid in ids:
        r = runs[eid]
        first = [x["first"] for x in r]
        second = [x["second"] for x in r]
        rows.append(
            {
                "exercise": eid,
                "tests": r[0]["tests"],
                "cases": r[0]["drawn"],
                "draws": r[0]["draws"],
                "first_min": min(first),
                "first_median": statistics.median(first),
                "second_min": min(second),
                "second_median": statistics.median(second),
            }
        )
    cmd = "python benchmarks/bench_checks.py" + (f" --reps {args.reps}" if args.reps != 5 else "")
    head = [
        "# check() on each exercise's solution: time, and the differential test's cases (issue 39)",
        "",
        f"`{cmd}`: {facts['cpu_model']}, {facts['cpu_count']} cores, torch {facts['torch']}, "
        f"OMP_WAIT_POLICY={facts['omp_wait_policy']}; load average {facts['loadavg_1m']:.1f} at start; "
        f"{args.reps} repetitions, a fresh interpreter per exercise and repetition (imports not timed).",
        "",
        "*first*: the learner's first check() in a kernel (draws the cases, runs the reference once); "
        "*again*: a second check() (both cached). Seconds, min / median over the repetitions.",
        "",
        "| exercise | tests | random cases | first check (s) | again (s) | what the strategy draws |",
        "|---|---|---|---|---|---|",
    ]
    body = [
        f"| `{r['exercise']}` | {r['tests']} | {r['cases']} | {r['first_min']:.2f} / {r['first_median']:.2f} | "
        f"{r['second_min']:.2f} / {r['second_median']:.2f} | {r['draws'].replace('|', '/')} |"
        for r in rows
    ]
    text = "\n".join(head + body) + "\n"
    print(text)
    if not args.only:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "checks.md").write_text(text)
        (RESULTS / "checks.json").write_text(json.dumps({"machine": facts, "command": cmd, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
