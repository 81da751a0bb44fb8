"""Shared helpers for the robustness tests: a tiny random-weight engine and the engine invariant check."""

from __future__ import annotations

from typing import Any

from pagedlab import LLMEngine, SamplingParams
from pagedlab.outputs import RequestOutput
from pagedlab.request import RequestStatus
from tests.core.helpers import check_manager
from tests.kernels.test_engine_triton import tiny_llama

VOCAB = 97  # tiny_llama's vocabulary

_TINY = tiny_llama()

__all__ = ["VOCAB", "assert_idle", "check_engine", "greedy", "run_to_completion", "tiny_engine", "tiny_llama"]


def tiny_engine(**kw: Any) -> LLMEngine:
    """An ``LLMEngine`` over the shared tiny Llama (2 layers, vocab 97, 256 positions), torch backend."""
    args: dict[str, Any] = {
        "block_size": 4,
        "num_gpu_blocks": 32,
        "max_model_len": 128,
        "attention_backend": "torch",
        "device": "cpu",
    }
    args.update(kw)
    return LLMEngine(_TINY, **args)


def check_engine(engine: LLMEngine) -> None:
    """Debug invariants of a whole engine, for use after every step.

    KV: ``check_manager`` (free + held == total, each block's ref_cnt == distinct tables holding it
    (+1 for the radix tree), free queue <=> ref 0, hash map consistent; same for the CPU pool).
    Queues: every unfinished request sits in exactly the queue its status names, and only there;
    a running request holds GPU blocks, a swapped one CPU blocks, a waiting one neither.
    """
    kv, sched = engine.kv_cache_manager, engine.scheduler
    check_manager(kv)
    running = [r.request_id for r in sched.running]
    swapped = [r.request_id for r in sched.swapped]
    waiting = [r.request_id for r in sched.waiting]
    queued = running + swapped + waiting
    assert len(queued) == len(set(queued)), f"a request is queued twice: {queued}"
    assert set(queued) == set(sched.requests), f"queues {sorted(queued)} != requests {sorted(sched.requests)}"
    where = {
        RequestStatus.RUNNING: running,
        RequestStatus.SWAPPED: swapped,
        RequestStatus.WAITING: waiting,
        RequestStatus.PREEMPTED: waiting,
    }
    for rid, req in sched.requests.items():
        assert rid in where[req.status], f"{rid} is {req.status.name} but not in that queue"
    assert set(kv.req_to_blocks) == set(running), f"GPU holders {sorted(kv.req_to_blocks)} != running {running}"
    assert set(kv.req_to_cpu_blocks) == set(swapped), "CPU holders != swapped"


def assert_idle(engine: LLMEngine) -> None:
    """Nothing queued, no block held by a request, every block free (or cached-free / in the tree)."""
    check_engine(engine)
    kv = engine.kv_cache_manager
    assert not engine.has_unfinished_requests()
    assert not kv.req_to_blocks and not kv.req_to_cpu_blocks
    assert kv.num_free_blocks == kv.num_gpu_blocks, f"{kv.num_gpu_blocks - kv.num_free_blocks} blocks leaked"
    if kv.cpu_block_pool is not None:
        assert kv.cpu_block_pool.get_num_free_blocks() == kv.num_cpu_blocks
    assert not engine.output_processor.groups and not engine._gens


def run_to_completion(engine: LLMEngine, max_steps: int, check: bool = True) -> dict[str, RequestOutput]:
    """Step until idle, checking invariants after each step; fail if it takes more than ``max_steps``."""
    outs: dict[str, RequestOutput] = {}
    steps = 0
    while engine.has_unfinished_requests():
        assert steps < max_steps, f"no finish within {max_steps} steps: the engine is spinning"
        for o in engine.step():
            outs[o.request_id] = o
        steps += 1
        if check:
            check_engine(engine)
    return outs


def greedy(max_tokens: int, n: int = 1) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True, n=n)
