"""An engine that serves many requests (with aborts) keeps bounded bookkeeping (issue 26, item 5).

Was: ``step_stats`` (one record per step) and ``finished_requests`` (every finished ``Request``,
with its prompt, output and token times) grew without bound, part of the soak's RSS growth. Now
each keeps its last entries (``History``: ``STEP_STATS_KEPT`` / ``FINISHED_REQUESTS_KEPT``), and no
other per-request state outlives a request: the Python heap of a second round of requests is
the first round's. ``benchmarks/soak.py`` measures the whole process over minutes.
"""

from __future__ import annotations

import gc
import random
import tracemalloc

import pytest

from pagedlab import SamplingParams
from pagedlab.engine import llm_engine
from tests.robust.helpers import VOCAB, assert_idle, tiny_engine

KEEP_STEPS, KEEP_FINISHED = 20, 8


def serve(engine: llm_engine.LLMEngine, rng: random.Random, requests: int, start: int) -> int:
    """``requests`` random requests, up to 6 in flight, a random one aborted now and then; returns the steps."""
    steps, next_id, live = 0, start, set[str]()
    while next_id < start + requests or engine.has_unfinished_requests():
        while len(live) < 6 and next_id < start + requests:
            params = SamplingParams(
                temperature=rng.choice([0.0, 0.8]),
                max_tokens=rng.randint(1, 6),
                n=rng.choice([1, 1, 2]),
                logprobs=rng.choice([None, 1]),
                seed=rng.choice([None, 7]),
                ignore_eos=True,
            )
            prompt = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 12))]
            engine.add_request(str(next_id), {"prompt_token_ids": prompt}, params)
            live.add(str(next_id))
            next_id += 1
        if rng.random() < 0.2:
            victim = rng.choice(sorted(live))
            engine.abort_request(victim)
            live.discard(victim)
        for o in engine.step():
            if o.finished:
                live.discard(o.request_id)
        steps += 1
    return steps


def test_documented_caps() -> None:
    eng = tiny_engine()
    assert eng.step_stats.maxlen == llm_engine.STEP_STATS_KEPT == 10_000
    assert eng.finished_requests.maxlen == llm_engine.FINISHED_REQUESTS_KEPT == 1_000


def test_step_stats_and_finished_requests_keep_their_last_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm_engine, "STEP_STATS_KEPT", KEEP_STEPS)
    monkeypatch.setattr(llm_engine, "FINISHED_REQUESTS_KEPT", KEEP_FINISHED)
    eng = tiny_engine(num_gpu_blocks=64)
    rng = random.Random(0)
    steps = serve(eng, rng, 60, 0)
    assert steps > KEEP_STEPS
    assert len(eng.step_stats) == KEEP_STEPS and eng.step_stats.total == steps
    assert [s.step for s in eng.step_stats] == list(range(steps - KEEP_STEPS, steps))  # the latest, in order
    assert eng.step_stats[-1].step == steps - 1 and len(eng.step_stats[-5:]) == 5
    fin = eng.finished_requests
    assert len(fin) == KEEP_FINISHED and fin.total >= 60  # every request and fork child finished once
    assert all(r.is_finished() for r in fin)
    assert_idle(eng)
    assert not eng.output_processor.logprobs and not eng.output_processor.member_group and not eng.scheduler.requests


def test_a_second_round_of_requests_leaves_the_python_heap_where_the_first_left_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(llm_engine, "STEP_STATS_KEPT", KEEP_STEPS)
    monkeypatch.setattr(llm_engine, "FINISHED_REQUESTS_KEPT", KEEP_FINISHED)
    eng = tiny_engine(num_gpu_blocks=64)
    rng = random.Random(1)
    serve(eng, rng, 40, 0)  # warm: caches built
    tracemalloc.start()
    try:
        serve(eng, rng, 60, 40)  # the bounded records now hold traced objects
        gc.collect()
        before = tracemalloc.take_snapshot()
        serve(eng, rng, 120, 100)
        gc.collect()
        grown = tracemalloc.take_snapshot().compare_to(before, "filename")
    finally:
        tracemalloc.stop()
    total = sum(d.size_diff for d in grown)
    # Was: every finished Request (~2 KB here) and every StepStats kept: > 200 KB for 120 requests.
    top = "\n".join(map(str, grown[:8]))
    assert total < 60_000, f"Python heap grew by {total} bytes over 120 requests:\n{top}"
