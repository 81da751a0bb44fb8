"""Property run: random small workloads schedule the same on the kit and on real vLLM, step by step.

Hypothesis draws the whole batch at once (``FUZZ_COUNT`` workloads, default 200) so that vLLM starts
once per engine configuration: each workload takes one of ``CONFIGS`` (pools of 3-5 usable blocks, just
above one request; budgets from 33 tokens up, ``max_num_seqs`` 1-4, ``long_prefill_token_threshold``,
chunked prefill on/off, prefix caching on/off, fcfs/priority) and draws requests sized to it: prompt
lengths under one block, of several blocks and just below the whole pool, shared prefixes of 0-70 tokens
and exact repeats (so the prefix cache has whole blocks to hit), output lengths, arrival steps,
priorities and aborts.

The batch is drawn from one ``random.Random`` that Hypothesis seeds (``st.randoms``): with one example
per run, Hypothesis's first example is its *simplest* one, and drawing every field through Hypothesis
made that a batch of 1-token workloads (no preemption, no prefix hit). The test asserts over the whole
batch that some workloads preempt and some hit the prefix cache, so such a degeneration fails loudly.
No shrinking (each example costs a vLLM run): a failure prints the first diverging workload as JSON,
which ``pagedlab.twin.compare(..., model=ensure_tiny_model())`` replays.

Every request has ``ignore_eos=True``, so no step depends on which tokens come out: both engines run the
tiny random-weight model in SmolLM2's shape (``pagedlab.twin.tiny_model``, the same folder on both), whose
forwards cost a fraction of SmolLM2's, and their greedy tokens are still compared for every workload. The
batch is compared once: Hypothesis replays a failing example, which then reads the cached comparison
instead of running both engines again.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import random

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pagedlab.twin import Divergence, EngineSettings, StepRecord, Trace, TwinRequest, Workload, compare
from pagedlab.twin.tiny_model import ensure_tiny_model

#: The issue's 200 (~5 min on a 2-core CPU: the tiny model, one comparison per batch); fewer with
#: ``PAGEDLAB_TWIN_FUZZ=N`` (the first N are the same workloads; the variety asserts need ~40).
FUZZ_COUNT = int(os.environ.get("PAGEDLAB_TWIN_FUZZ", "200"))
BLOCK = 32  # vLLM 0.32's CPU attention: multiples of 32
PREFIXES = [[1000 + 7 * i + j for j in range(70)] for i in range(3)]


def _config(blocks: int, **kw: object) -> EngineSettings:
    return EngineSettings(block_size=BLOCK, num_gpu_blocks=blocks, max_model_len=(blocks - 1) * BLOCK, **kw)  # type: ignore[arg-type]


#: One vLLM engine each. max_model_len is the whole usable pool (vLLM 0.32 needs one such request to fit).
CONFIGS = [
    _config(4, max_num_batched_tokens=33, max_num_seqs=3, enable_prefix_caching=True),
    _config(
        5, max_num_batched_tokens=64, max_num_seqs=2, long_prefill_token_threshold=40, scheduling_policy="priority"
    ),
    _config(
        6,
        max_num_batched_tokens=160,
        max_num_seqs=4,
        enable_chunked_prefill=False,
        enable_prefix_caching=True,
        scheduling_policy="priority",
    ),
    _config(4, max_num_batched_tokens=100, max_num_seqs=4, long_prefill_token_threshold=8, enable_prefix_caching=True),
]


def random_workload(rng: random.Random, index: int) -> Workload:
    """One small workload on one of ``CONFIGS``: 1-5 requests whose lengths reach the whole pool."""
    engine = rng.choice(CONFIGS)
    room = engine.engine_args()["max_model_len"]
    reqs: list[TwinRequest] = []
    for i in range(rng.randint(1, 5)):
        kind = rng.choice(["short", "blocks", "blocks", "pool"])
        lo, hi = {"short": (2, BLOCK), "blocks": (BLOCK + 1, room), "pool": (room - BLOCK + 1, room)}[kind]
        total = rng.randint(lo, hi)
        max_tokens = rng.randint(1, min(12, total - 1))
        n_prompt = total - max_tokens
        if reqs and rng.random() < 0.2:  # an earlier prompt again (cut to fit)
            prompt = rng.choice(reqs).prompt_token_ids[:n_prompt]
        else:
            shared = rng.choice([0, rng.randint(0, 70), BLOCK, 2 * BLOCK, 70])
            prefix = rng.choice(PREFIXES)[: min(shared, n_prompt)]
            prompt = prefix + [rng.randint(100, 49000) for _ in range(n_prompt - len(prefix))]
        arrival = rng.randint(0, 6)
        abort = rng.randint(arrival, arrival + 10) if rng.random() < 1 / 6 else None
        sampling = {"temperature": 0.0, "max_tokens": max_tokens, "ignore_eos": True}
        reqs.append(TwinRequest(f"w{index}r{i}", prompt, sampling, arrival, rng.randint(0, 3), abort))
    return Workload(f"fuzz{index}", engine, reqs)


@st.composite
def batches(draw: st.DrawFn) -> list[Workload]:
    rng = draw(st.randoms(use_true_random=True))
    return [random_workload(rng, i) for i in range(FUZZ_COUNT)]


#: One example, Hypothesis's first (reproducible: derandomized), no shrinking (each example costs a vLLM run).
ONE_BATCH = settings(
    max_examples=1,
    phases=[Phase.generate],
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@ONE_BATCH
@given(batches())
def test_the_batch_is_varied(batch: list[Workload]) -> None:
    """The drawn batch itself, before vLLM runs: multi-block and short prompts, every config, shared prefixes."""
    lengths = [len(r.prompt_token_ids) for w in batch for r in w.requests]
    assert len(batch) == FUZZ_COUNT and max(lengths) > 3 * BLOCK and min(lengths) < BLOCK
    assert sum(n > BLOCK for n in lengths) >= len(lengths) // 3, "few prompts longer than one block"
    used = {json.dumps(w.engine.engine_args(), sort_keys=True) for w in batch}
    assert used == {json.dumps(c.engine_args(), sort_keys=True) for c in CONFIGS}
    assert sum(len(w.requests) > 1 for w in batch) >= FUZZ_COUNT // 2, "mostly lone requests"
    shared = [w for w in batch if len({tuple(r.prompt_token_ids[:BLOCK]) for r in w.requests}) < len(w.requests)]
    assert len(shared) >= FUZZ_COUNT // 10, "few workloads whose requests share a first block"


@ONE_BATCH
@given(batches())
def test_random_workloads_schedule_identically(batch: list[Workload]) -> None:
    results = _compared(json.dumps([w.to_dict() for w in batch]))
    failures = [(w, d) for w, (_, _, d) in zip(batch, results) if d is not None]
    steps = sum(len(v.steps) for _, v, _ in results)
    preempting = sum(any(s.preempted for s in v.steps) for _, v, _ in results)
    hitting = sum(any(n > 0 for s in v.steps for n in s.num_cached_tokens.values()) for _, v, _ in results)
    chunked = sum(
        any(n > 1 and r in _seen_before(v, s) for s in v.steps for r, n in s.scheduled) for _, v, _ in results
    )
    print(
        f"twin fuzz: {len(batch)} workloads, {steps} vLLM steps; workloads with a preemption {preempting}, "
        f"a prefix hit {hitting}, a continued prefill chunk {chunked}"
    )
    # over the whole batch (vLLM's traces; the kit's equal them where nothing diverges): degeneration fails here
    least = max(1, len(batch) // 20)
    assert preempting >= least, f"only {preempting}/{len(batch)} workloads preempt (want >= {least})"
    assert hitting >= least, f"only {hitting}/{len(batch)} workloads hit the prefix cache (want >= {least})"
    assert chunked >= least, f"only {chunked}/{len(batch)} workloads chunk a prefill (want >= {least})"
    if failures:
        w, d = failures[0]
        names = ", ".join(w.name for w, _ in failures)
        print(f"twin fuzz: {len(failures)}/{len(batch)} workloads diverge ({names}); first: {w.name} at {d}")
        raise AssertionError(
            f"{len(failures)}/{len(batch)} workloads diverge; first: {w.name} at {d}\n{json.dumps(w.to_dict())}"
        )


@ONE_BATCH
@given(batches())
def test_random_workloads_give_the_same_tokens(batch: list[Workload]) -> None:
    """Greedy tokens of every request equal (the comparison above, read from its cache) whether or not the
    schedules agree: the kit runs the tiny model's very weights. A request aborted on either side may have
    got further on one: there one side's tokens start the other's. And the tokens vary."""
    results = _compared(json.dumps([w.to_dict() for w in batch]))
    failures = [(w, d) for w, (k, v, _) in zip(batch, results) if (d := _token_difference(k, v)) is not None]
    distinct = {t for _, v, _ in results for toks in v.tokens.values() for c in toks for t in c}
    assert len(distinct) > len(batch), f"the tiny model's greedy outputs barely vary: {len(distinct)} distinct tokens"
    if failures:
        w, d = failures[0]
        names = ", ".join(w.name for w, _ in failures)
        raise AssertionError(
            f"{len(failures)}/{len(batch)} workloads give other tokens ({names}); first: {w.name} at {d}"
        )


def _token_difference(kit: Trace, vllm: Trace) -> str | None:
    """The first request whose greedy tokens differ (prefixes where it is aborted on a side), or None."""
    for rid in sorted(set(kit.tokens) | set(vllm.tokens)):
        a, b = kit.tokens.get(rid), vllm.tokens.get(rid)
        reasons = kit.finish_reasons.get(rid, []), vllm.finish_reasons.get(rid, [])
        if "abort" in reasons[0] + reasons[1]:  # one side may have got further, or had no output yet ([])
            same = all(x[: len(y)] == y[: len(x)] for x, y in itertools.zip_longest(a or [], b or [], fillvalue=[]))
        else:
            same = a == b
        if not same:
            return f"{rid}: kit {a}, vLLM {b} (finished: kit {reasons[0]}, vLLM {reasons[1]})"
    return None


def _seen_before(trace: Trace, step: StepRecord) -> set[str]:
    """Requests scheduled in an earlier step of ``trace`` than ``step`` and not newly admitted in it."""
    return {r for s in trace.steps if s.step < step.step for r, _ in s.scheduled} - set(step.num_cached_tokens)


@functools.lru_cache(maxsize=1)
def _compared(batch_json: str) -> list[tuple[Trace, Trace, Divergence | None]]:
    """``compare`` of the batch (as JSON) on the tiny model, once per batch: Hypothesis re-runs a failing
    example to report it, which would otherwise run both engines a second time."""
    batch = [Workload.from_dict(d) for d in json.loads(batch_json)]
    return compare(batch, model=ensure_tiny_model())
