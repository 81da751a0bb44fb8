"""Soak: random requests and random aborts on one engine for ``--minutes``; does the memory stay flat?

Keeps a random number of requests in flight on one ``LLMEngine`` (the bundled SmolLM2): token-id
prompts of random lengths (some sharing a prefix, for the prefix cache) and text prompts, random
sampling parameters over all the kit serves (greedy or sampled with top-p / top-k / min-p, ``n`` of
1-3, stop strings kept in the text or not, stop token ids, ``min_tokens``, the three penalties,
log-probabilities up to 20, seeds, EOS honoured or ignored, special tokens skipped or kept,
``detokenize=False``, the ``FINAL_ONLY`` output kind; :func:`random_params`), and aborts a random
one now and then.

Before the clock starts, :func:`warm_shapes` runs one step at every padded row count the engine can
schedule, so oneDNN's per-shape kernels are built (as a server warms up) rather than appearing minutes
into the run. Then it samples the process's RSS (and glibc's heap: live vs freed-but-held, see
``pagedlab.engine.malloc.heap_mb``; the number of Python objects; the engine's histories) every
``--every`` seconds and reports RSS at the start, after one minute, at the end, and the growth after
the first minute in MB/min (end minus the 1-minute value, and a least-squares slope), MB per 1,000
steps and per 1,000 requests (a busy machine runs fewer steps per minute). That span is also cut in
two halves: a cache that fills grows the first half and leaves the second flat (a plateau); a leak
grows both. At the end it records the row counts the run met that the warm-up had not built
(``new_shapes_in_run``) and what the engine's bounded histories held (``histories``: RSS before and
after emptying them). Writes ``benchmarks/results/soak.json`` (``--out``).

  make soak                                    # 30 minutes (SOAK_ARGS='--minutes 10' to change)
  .venv/bin/python benchmarks/soak.py --minutes 10 --threads 2
  .venv/bin/python benchmarks/soak.py --minutes 10 --trim-every 0   # as before malloc_trim
  .venv/bin/python benchmarks/soak.py --minutes 10 --no-warm-shapes  # oneDNN's kernels built during the run

The settings in effect are recorded in the result: the engine's ``MALLOC_TRIM_EVERY`` (steps between
``malloc_trim`` calls, ``--trim-every``), ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` (oneDNN's cache of
compiled kernels; default 1024) and glibc's ``MALLOC_*`` variables, which act only when set before the
process starts. ``--tracemalloc`` lists the Python allocations that grew between the 1-minute mark
and the end (tracing starts after the warm-up; it slows the steps several-fold).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's pagedlab, not an installed one

from pagedlab import LLMEngine, SamplingParams  # noqa: E402
from pagedlab.engine import llm_engine, malloc  # noqa: E402
from pagedlab.engine.arg_utils import EngineArgs  # noqa: E402
from pagedlab.model.cpu_linear import padded_rows  # noqa: E402
from pagedlab.sampling_params import RequestOutputKind  # noqa: E402

ENV_KEYS = (
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY",
    "MALLOC_ARENA_MAX",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
)


def random_params(rng: random.Random, vocab: int) -> SamplingParams:
    """Sampling parameters drawn over the whole of what the kit serves (vLLM 0.32.0's fields).

    Greedy or sampled (top-p / top-k / min-p), ``n`` of 1-3, stop strings (kept in the text or
    not), stop token ids, ``min_tokens``, the three penalties, log-probabilities (0-20, vLLM's
    default ``max_logprobs``), seeds, EOS honoured or ignored, special tokens skipped or kept,
    ``detokenize=False`` (token ids only; never with stop strings, which vLLM refuses) and the
    ``FINAL_ONLY`` output kind.
    """
    greedy = rng.random() < 0.4
    max_tokens = rng.randint(1, 48)
    stop = rng.choice([None, None, ["\n\n"], [".", "!"], ["the", "\n"]])
    detokenize = stop is not None or rng.random() < 0.85
    return SamplingParams(
        temperature=0.0 if greedy else rng.choice([0.5, 0.8, 1.2]),
        top_p=1.0 if greedy else rng.choice([1.0, 0.9, 0.5]),
        top_k=0 if greedy else rng.choice([0, 0, 20]),
        min_p=0.0 if greedy else rng.choice([0.0, 0.0, 0.05]),
        max_tokens=max_tokens,
        min_tokens=rng.choice([0, 0, rng.randint(0, max_tokens)]),
        n=rng.choices([1, 2, 3], weights=[75, 20, 5])[0],
        stop=stop,
        stop_token_ids=rng.sample(range(vocab), rng.randint(1, 3)) if rng.random() < 0.2 else None,
        include_stop_str_in_output=rng.random() < 0.3,
        presence_penalty=rng.choice([0.0, 0.0, 0.5, -0.5]),
        frequency_penalty=rng.choice([0.0, 0.0, 0.3]),
        repetition_penalty=rng.choice([1.0, 1.0, 1.2, 0.9]),
        logprobs=rng.choice([None, None, None, 0, 2, 5, 20]),
        seed=rng.randint(0, 2**31) if rng.random() < 0.2 else None,
        ignore_eos=rng.random() < 0.5,
        detokenize=detokenize,
        skip_special_tokens=rng.random() < 0.8,
        spaces_between_special_tokens=rng.random() < 0.8,
        output_kind=RequestOutputKind.FINAL_ONLY if rng.random() < 0.2 else RequestOutputKind.CUMULATIVE,
    )


WORDS = [
    "the",
    "cache",
    "block",
    "page",
    "token",
    "prefix",
    "request",
    "memory",
    "engine",
    "step",
    "model",
    "text",
    "a",
    "of",
    "to",
    "and",
]


def random_prompt(rng: random.Random, prefix: list[int], vocab: int) -> object:
    """Token ids (40% starting with a shared prefix, for the prefix cache) or, one time in five, text."""
    if rng.random() < 0.2:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 120)))
    tail = [rng.randrange(100, vocab) for _ in range(rng.randint(4, 200))]
    ids = (prefix[: rng.randint(16, len(prefix))] + tail) if rng.random() < 0.4 else tail
    return {"prompt_token_ids": ids}


class Soak:
    """The load: keeps ``target`` requests in flight (re-drawn now and then), aborts one at random."""

    def __init__(self, engine: LLMEngine, seed: int) -> None:
        self.engine, self.rng = engine, random.Random(seed)
        self.vocab = engine.model_config.vocab_size
        self.prefix = [self.rng.randrange(100, self.vocab) for _ in range(96)]
        self.live: set[str] = set()
        self.target = 8
        self.steps = self.submitted = self.aborted = self.finished = 0

    def step(self) -> None:
        rng, eng = self.rng, self.engine
        if rng.random() < 0.01:
            self.target = rng.randint(1, 24)
        while len(self.live) < self.target:
            rid = f"soak-{self.submitted}"
            eng.add_request(rid, random_prompt(rng, self.prefix, self.vocab), random_params(rng, self.vocab))
            self.live.add(rid)
            self.submitted += 1
        if self.live and rng.random() < 0.05:
            victim = rng.choice(sorted(self.live))
            eng.abort_request(victim)
            self.live.discard(victim)
            self.aborted += 1
        for out in eng.step():
            if out.finished:
                self.live.discard(out.request_id)
                self.finished += 1
        self.steps += 1


def rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(x, y)`` points (0 for fewer than two)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def warm_shapes(engine: LLMEngine, seed: int) -> list[int]:
    """Run one step at every padded row count the soak can schedule (``padded_rows`` of 1 to
    ``max_num_batched_tokens``): a prefill of that many random tokens, split in two prompts when one
    would not fit ``max_model_len``. oneDNN builds and caches one kernel per matrix shape
    (``pagedlab.model.cpu_linear.padded_rows``); served requests meet the rarer shapes (a step of 400+
    tokens) minutes apart, so without this the cache fills during the measured run. The LM head runs
    on the rows that are sampled, one per sequence: a step with ``r`` prompts at every padded ``r`` up
    to ``max_num_seqs`` builds those (in the 2026-12-07 run, without them, the live heap rose 12 MB
    over 15 minutes, then stayed flat; the LM head alone at the 22 missing row counts: +13.2 MB once).
    vLLM's CPU worker warms up at start-up too (``compile_or_warm_up_model``), on one shape. Returns
    the row counts warmed.
    """
    rng = random.Random(seed + 1)
    budget = engine.scheduler_config.max_num_batched_tokens
    room = engine.scheduler_config.max_model_len - 1
    shapes = sorted({padded_rows(t) for t in range(1, budget + 1)})
    for t in shapes:
        parts = [t] if t <= room else [t // 2, t - t // 2]
        for i, n in enumerate(parts):
            ids = [rng.randrange(100, engine.model_config.vocab_size) for _ in range(n)]
            engine.add_request(f"warm-{t}-{i}", {"prompt_token_ids": ids}, SamplingParams(max_tokens=1, temperature=0))
        while engine.has_unfinished_requests():
            engine.step()
    for r in sorted({padded_rows(n) for n in range(1, engine.scheduler_config.max_num_seqs + 1)}):
        for i in range(r):  # r sequences sampled in one step: the LM head at r rows
            ids = [rng.randrange(100, engine.model_config.vocab_size) for _ in range(4)]
            engine.add_request(
                f"warm-seqs-{r}-{i}", {"prompt_token_ids": ids}, SamplingParams(max_tokens=1, temperature=0)
            )
        while engine.has_unfinished_requests():
            engine.step()
    return shapes


def history_mb(engine: LLMEngine) -> dict[str, float]:
    """What the engine's bounded histories (``step_stats``, ``finished_requests``) hold: RSS and live C heap
    before and after emptying them (then ``gc`` and ``malloc_trim``). Run at the end: it empties them."""
    gc.collect()
    malloc.trim()
    before, heap0 = rss_mb(), malloc.heap_mb().get("malloc_in_use_mb", 0.0)
    engine.step_stats.clear()
    engine.finished_requests.clear()
    gc.collect()
    malloc.trim()
    return dict(
        rss_trimmed_mb=round(before, 1),
        rss_without_histories_mb=round(rss_mb(), 1),
        histories_rss_mb=round(before - rss_mb(), 1),
        histories_heap_mb=round(heap0 - malloc.heap_mb().get("malloc_in_use_mb", 0.0), 1),
    )


def run(minutes: float, seed: int, every: float, trace: bool, warm: bool = True) -> dict[str, Any]:
    engine = LLMEngine.from_engine_args(EngineArgs(max_model_len=512, num_gpu_blocks_override=256, seed=seed))
    soak = Soak(engine, seed)
    t_warm = time.monotonic()
    shapes = warm_shapes(engine, seed) if warm else []
    for _ in range(20):  # warm-up: the first steps build the allocator's pools
        soak.step()
    warm_s = time.monotonic() - t_warm
    if trace:  # from here: tracing the model's loading would take many minutes
        tracemalloc.start(10)
    t0, samples = time.monotonic(), []
    next_sample, snap1 = 0.0, None

    def sample(t: float) -> None:
        row = dict(
            t_min=round(t / 60, 3),
            rss_mb=round(rss_mb(), 1),
            steps=soak.steps,
            submitted=soak.submitted,
            aborted=soak.aborted,
            step_stats=len(engine.step_stats),
            finished_requests=len(engine.finished_requests),
            py_objects=len(gc.get_objects()),
            gc_collections=[g["collections"] for g in gc.get_stats()],
            **malloc.heap_mb(),
        )
        samples.append(row)
        print(json.dumps(row), flush=True)

    while (t := time.monotonic() - t0) < minutes * 60:
        if t >= next_sample:
            sample(t)
            next_sample += every
            if trace and snap1 is None and t >= 60:
                snap1 = tracemalloc.take_snapshot()
        soak.step()
    sample(time.monotonic() - t0)
    while engine.has_unfinished_requests():  # drain: the engine itself must end clean
        engine.step()
    kv = engine.kv_cache_manager
    seen = {padded_rows(s.num_prefill_tokens + s.num_decode_tokens) for s in engine.step_stats}
    return summarize(samples, minutes, trace_top(snap1) if trace else None) | dict(
        seed=seed,
        env={k: os.environ.get(k) for k in ENV_KEYS},
        malloc_trim_every=llm_engine.MALLOC_TRIM_EVERY,
        threads=__import__("torch").get_num_threads(),
        blocks_free_at_end=f"{kv.num_free_blocks}/{kv.num_gpu_blocks}",
        requests={"submitted": soak.submitted, "aborted": soak.aborted, "finished": soak.finished},
        warm_up={"shapes": len(shapes), "seconds": round(warm_s, 1)},
        # row counts the kept steps ran at that the warm-up did not build (0 with the warm-up on)
        new_shapes_in_run=sorted(seen - set(shapes)),
        histories=history_mb(engine),
    )


def growth(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """RSS growth from sample ``a`` to ``b``: MB/min, MB per 1,000 steps, MB per 1,000 requests submitted."""
    mb = b["rss_mb"] - a["rss_mb"]
    return dict(
        mb=round(mb, 1),
        mb_per_min=round(mb / max(b["t_min"] - a["t_min"], 1e-9), 2),
        mb_per_1000_steps=round(1000 * mb / max(b["steps"] - a["steps"], 1), 2),
        mb_per_1000_requests=round(1000 * mb / max(b["submitted"] - a["submitted"], 1), 2),
    )


def summarize(samples: list[dict[str, Any]], minutes: float, top: list[str] | None) -> dict[str, Any]:
    """RSS at start / 1 min / end, the growth after the first minute, and that growth split in halves.

    A cache that fills while the run warms up (oneDNN kernels per shape, allocator pools) grows RSS
    early and then stays flat: a plateau, not a leak. So the span after the first minute is also cut
    in two at its middle sample: growth in the second half near 0 is a plateau; a leak grows in both.
    """
    start, end = samples[0], samples[-1]
    after = [s for s in samples if s["t_min"] >= 1.0] or [end]
    one = after[0]
    mid = after[len(after) // 2]
    whole = growth(one, end)
    return dict(
        minutes=round(end["t_min"], 2),
        rss_start_mb=start["rss_mb"],
        rss_1min_mb=one["rss_mb"],
        rss_mid_mb=mid["rss_mb"],
        rss_end_mb=end["rss_mb"],
        mb_per_min_after_1min=whole["mb_per_min"],
        mb_per_min_fit=round(slope([(s["t_min"], s["rss_mb"]) for s in after]), 2),
        mb_per_1000_steps=whole["mb_per_1000_steps"],
        mb_per_1000_requests=whole["mb_per_1000_requests"],
        first_half=growth(one, mid) | dict(t_min=[one["t_min"], mid["t_min"]]),
        second_half=growth(mid, end) | dict(t_min=[mid["t_min"], end["t_min"]]),
        mb_per_min_fit_second_half=round(slope([(s["t_min"], s["rss_mb"]) for s in after[len(after) // 2 :]]), 2),
        steps_per_min=round((end["steps"] - start["steps"]) / max(end["t_min"], 1e-9), 1),
        tracemalloc_top=top,
        samples=samples,
    )


def trace_top(before: Any) -> list[str]:
    if before is None:
        return ["(the run ended before the 1-minute snapshot)"]
    diff = tracemalloc.take_snapshot().compare_to(before, "lineno")
    return [str(d) for d in diff[:10]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=float, default=15.0, help="seconds between RSS samples (default 15)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--tracemalloc", action="store_true", help="list Python allocations grown after 1 minute")
    ap.add_argument(
        "--trim-every",
        type=int,
        default=None,
        help=f"steps between malloc_trim calls (default the engine's, {llm_engine.MALLOC_TRIM_EVERY}; 0: never)",
    )
    ap.add_argument("--no-warm-shapes", action="store_true", help="skip the warm-up over every padded row count")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "soak.json")
    args = ap.parse_args()
    if args.minutes <= 0 or args.every <= 0:
        ap.error("--minutes and --every must be > 0")
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    if args.trim_every is not None:
        llm_engine.MALLOC_TRIM_EVERY = args.trim_every
    result = run(args.minutes, args.seed, args.every, args.tracemalloc, warm=not args.no_warm_shapes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    keys = ("minutes", "rss_start_mb", "rss_1min_mb", "rss_end_mb", "mb_per_min_after_1min", "mb_per_min_fit")
    print("soak: " + ", ".join(f"{k}={result[k]}" for k in keys + ("mb_per_1000_steps", "steps_per_min")))
    for half in ("first_half", "second_half"):
        print(f"  {half}: " + ", ".join(f"{k}={v}" for k, v in result[half].items()))
    for line in result["tracemalloc_top"] or []:
        print("  " + line)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
