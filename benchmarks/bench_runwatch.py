"""How much ``pagedlab grade``'s run-time watch (``provenance.RunWatch``: CPython's profiler, on in the learner's
process while it serves the tests) slows the learner's code.

Run: ``python benchmarks/bench_runwatch.py [--exercise 07.insert] [--reps 7]``. Runs every public test of the
exercise in this process on the solution cell's object and times the learner's calls only, in CPU seconds of
this thread (a busy machine disturbs them less than wall time; the driver's own work runs in the grader's
process under ``pagedlab grade``, unprofiled): once with a ``RunWatch`` started and once without, alternating
which goes first; prints the min and median of each, the per-repetition ratio, and the machine. The learner
process's other work under the watch (serving the pipe) is not in these figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_engine import machine_facts  # noqa: E402


def learner_seconds(exercise_id: str, watched: bool) -> float:
    """Seconds spent inside the solution's calls while every public test of ``exercise_id`` runs."""
    from pagedlab.grading import registry
    from pagedlab.grading.provenance import Provenance, RunWatch
    from pagedlab.grading.runner import run_driver

    ex = registry.get(exercise_id)
    fn = registry.snippet_object(exercise_id)
    spent = [0.0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - t0

    watch = RunWatch(Provenance([exercise_id])) if watched else None
    if watch is not None:
        watch.start()
    try:
        for test in ex.public_tests():
            entries = run_driver(test, timed, timeout=600)
            assert not any(e.get("kind") == "error" for e in entries), (test.title, entries[-1])
    finally:
        if watch is not None:
            watch._profiler.disable()  # RunWatch has no stop(): the learner process ends instead
    assert watch is None or watch._profiler.getstats()  # the watch recorded the calls
    return spent[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exercise", default="07.insert")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    facts = machine_facts()
    learner_seconds(args.exercise, False)  # warm-up: imports, the reference transcripts' caches
    plain: list[float] = []
    watched: list[float] = []
    for rep in range(args.reps):
        for w in (rep % 2 == 0, rep % 2 != 0):
            (watched if w else plain).append(learner_seconds(args.exercise, w))
    ratios = [w / p for w, p in zip(watched, plain)]
    print(f"command: python benchmarks/bench_runwatch.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"machine: {facts.get('cpu_model')}; {facts.get('cpu_count')} cores; load average {facts.get('loadavg_1m')}")
    for name, xs in (("without the watch", plain), ("under RunWatch", watched)):
        print(
            f"{args.exercise} learner code, {name}: min {1e3 * min(xs):.1f} ms, median {1e3 * statistics.median(xs):.1f} ms CPU"
        )
    print(
        f"slowdown per repetition: min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
