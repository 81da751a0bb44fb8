"""Progress guarantee, property-tested: every request the engine accepts ends, and nothing leaks.

Hypothesis draws engine settings (block size, pool and swap sizes, token budget, chunked prefill on
or off, long-prefill cap, max_num_seqs, fcfs/priority, recompute/swap preemption, prefix caching
hash/radix/off, continuous/static) and a request mix (lengths around the block size, shared
prefixes, n > 1, priorities, late arrivals, aborts) and runs it on a tiny random-weight Llama.
Every request is either refused at submission with ``InvalidRequestError`` or produces exactly one
``RequestOutput`` within a step bound; the engine's invariants (``check_engine``) hold after every
step, and at idle no block is held. A few runs repeat the check on SmolLM2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pagedlab import SamplingParams
from pagedlab.errors import InvalidRequestError
from tests.robust.helpers import VOCAB, assert_idle, check_engine, tiny_engine

NUM_RUNS = 520


@dataclass
class Arrival:
    step: int  # submitted before this step
    prompt: list[int]
    max_tokens: int
    n: int
    priority: int
    abort_at: int | None  # aborted before this step (if still unfinished)


@st.composite
def engine_settings(draw: st.DrawFn) -> dict[str, Any]:
    block_size = draw(st.sampled_from([1, 2, 4, 4, 8]))
    mode = draw(st.sampled_from(["recompute", "swap"]))
    caching = draw(st.sampled_from([None, "hash", "radix"]))
    kw: dict[str, Any] = {
        "block_size": block_size,
        "num_gpu_blocks": draw(st.integers(2, 16)),
        "max_num_batched_tokens": draw(st.integers(1, 40)),
        "enable_chunked_prefill": draw(st.booleans()),
        "long_prefill_token_threshold": draw(st.sampled_from([0, 0, 3, 7])),
        "max_num_seqs": draw(st.integers(1, 8)),
        "policy": draw(st.sampled_from(["fcfs", "priority"])),
        "preemption_mode": mode,
        "num_cpu_blocks": draw(st.integers(1, 24)) if mode == "swap" else 0,
        "enable_prefix_caching": caching is not None,
        "prefix_cache": caching or "hash",
        "scheduling": draw(st.sampled_from(["continuous"] * 4 + ["static"])),
        "max_model_len": draw(st.sampled_from([32, 64])),
        "hash_seed": 0,
    }
    return kw


@st.composite
def request_mix(draw: st.DrawFn) -> list[Arrival]:
    base = draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=12))
    out = []
    for _ in range(draw(st.integers(1, 8))):
        shared = draw(st.integers(0, len(base)))
        tail = draw(st.lists(st.integers(0, VOCAB - 1), min_size=0 if shared else 1, max_size=14))
        abort = draw(st.one_of(st.none(), st.integers(0, 12))) if draw(st.integers(0, 5)) == 0 else None
        out.append(
            Arrival(
                step=draw(st.sampled_from([0, 0, 0, 1, 3, 6])),
                prompt=base[:shared] + tail,
                max_tokens=draw(st.integers(1, 12)),
                n=draw(st.sampled_from([1, 1, 1, 2, 3])),
                priority=draw(st.integers(0, 3)),
                abort_at=abort,
            )
        )
    return out


def _step_bound(accepted: list[Arrival]) -> int:
    """Generous but finite: every token of every completion computed a few times over (recompute
    preemption redoes work, static batching idles), plus the arrival delays."""
    work = sum(a.n * (len(a.prompt) + a.max_tokens) for a in accepted)
    return 10 * work + 20


def drive(engine: Any, mix: list[Arrival]) -> None:  # noqa: C901 - a test oracle: invariants checked one after another
    """Submit ``mix`` at its arrival steps, abort where asked, run to idle; assert the guarantee."""
    accepted: dict[str, Arrival] = {}
    outputs: dict[str, Any] = {}
    aborted: set[str] = set()  # abort_request ends a request without an output (as vLLM)
    pending = sorted(enumerate(mix), key=lambda p: p[1].step)
    step = 0
    bound = 10_000
    while pending or engine.has_unfinished_requests():
        while pending and pending[0][1].step <= step:
            i, a = pending.pop(0)
            sp = SamplingParams(temperature=0, max_tokens=a.max_tokens, n=a.n, ignore_eos=True)
            try:
                engine.add_request(str(i), {"prompt_token_ids": a.prompt}, sp, priority=a.priority)
            except InvalidRequestError:
                continue  # refused up front: the other half of the guarantee
            accepted[str(i)] = a
            bound = _step_bound(list(accepted.values())) + 6
        for rid, a in accepted.items():
            if a.abort_at == step and rid not in outputs and rid not in aborted:
                engine.abort_request(rid)
                aborted.add(rid)
        for o in engine.step():
            if not o.finished:
                continue  # a partial output (vLLM v1 step semantics)
            assert o.request_id not in outputs, f"{o.request_id} finished twice"
            outputs[o.request_id] = o
        check_engine(engine)
        step += 1
        assert step <= bound, f"step {step} > bound {bound}: the engine is spinning"
    assert not set(outputs) & aborted
    assert set(outputs) | aborted == set(accepted), f"accepted {sorted(accepted)} but ended {sorted(outputs)}"
    for rid, o in outputs.items():
        a = accepted[rid]
        assert len(o.outputs) == a.n
        for c in o.outputs:
            if c.finish_reason == "length":
                assert (
                    len(c.token_ids) == a.max_tokens
                    or len(a.prompt) + len(c.token_ids) == engine.scheduler_config.max_model_len
                )
            else:  # only our aborts and unschedulable rejections abort
                assert c.finish_reason == "abort", c.finish_reason
                assert not engine.scheduler_config.enable_chunked_prefill and o.pagedlab_metrics.num_preemptions > 0
    assert_idle(engine)


@settings(
    max_examples=NUM_RUNS,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(kw=engine_settings(), mix=request_mix())
@example(  # issue 16 case 1b: recompute-preempted requests outgrow the budget with chunking off
    kw={"block_size": 4, "num_gpu_blocks": 6, "max_num_batched_tokens": 8, "enable_chunked_prefill": False},
    mix=[Arrival(0, [1 + i, 2, 3, 4, 5, 6], 10, 1, 0, None) for i in range(3)],
)
@example(  # a swapped fork group of 3 sharing one partial block must come back into the 3-block pool
    kw={
        "block_size": 4,
        "num_gpu_blocks": 3,
        "max_num_batched_tokens": 3,
        "enable_chunked_prefill": True,
        "max_num_seqs": 5,
        "preemption_mode": "swap",
        "num_cpu_blocks": 1,
    },
    mix=[Arrival(0, [0], 2, 2, 0, None), Arrival(0, [0], 2, 3, 0, None)],
)
def test_every_accepted_request_finishes_on_tiny_llama(kw: dict[str, Any], mix: list[Arrival]) -> None:
    drive(tiny_engine(**kw), mix)


@pytest.mark.model
@pytest.mark.parametrize(
    "kw",
    [
        {"num_gpu_blocks": 6, "block_size": 4, "max_num_batched_tokens": 12, "enable_chunked_prefill": False},
        {
            "num_gpu_blocks": 7,
            "block_size": 4,
            "max_num_batched_tokens": 9,
            "preemption_mode": "swap",
            "num_cpu_blocks": 8,
            "enable_prefix_caching": True,
        },
        {
            "num_gpu_blocks": 8,
            "block_size": 2,
            "max_num_batched_tokens": 5,
            "policy": "priority",
            "long_prefill_token_threshold": 3,
        },
    ],
)
def test_every_accepted_request_finishes_on_smollm2(kw: dict[str, Any]) -> None:
    from pagedlab import LLMEngine

    engine = LLMEngine(max_model_len=64, **kw)
    prompt = [1, 9690, 198, 2683, 359, 253, 5356]
    mix = [
        Arrival(0, prompt, 6, 1, 0, None),
        Arrival(0, prompt[:4] + [42, 43], 5, 2, 1, None),
        Arrival(1, prompt + [99] * 6, 4, 1, 0, None),
        Arrival(2, [5, 6, 7], 6, 1, 2, 3),
    ]
    drive(engine, mix)
