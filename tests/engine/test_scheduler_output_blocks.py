"""The scheduling output carries what the model runner needs (issue 34): every ``ScheduledRequest`` holds
its request's block table (``block_ids``, vLLM 0.32.0's ``NewRequestData.block_ids``), final for the step,
and the model runner computes the step from the output alone, never asking the KV-cache manager.
The parts reach the scheduler and the model runner through their constructors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.engine.components import Components
from pagedlab.errors import InvalidRequestError
from pagedlab.sched.scheduler import Scheduler, SchedulerOutput
from pagedlab.sched.static import StaticScheduler
from tests.robust.helpers import assert_idle, greedy, run_to_completion, tiny_engine

SETTINGS = {
    "recompute": {"num_gpu_blocks": 12, "enable_prefix_caching": True},
    "swap": {"num_gpu_blocks": 12, "num_cpu_blocks": 32, "preemption_mode": "swap"},
    "static": {"num_gpu_blocks": 24, "scheduling": "static"},
}


def _watch(engine: Any) -> list[tuple[str, list[int], list[int]]]:
    """Record ``(request id, block_ids carried, the manager's table)`` of every request the runner
    executes, with the manager's ``get_block_ids`` refused while the runner runs."""
    kv, runner = engine.kv_cache_manager, engine.model_runner
    seen: list[tuple[str, list[int], list[int]]] = []
    real_execute, real_get = runner.execute, kv.get_block_ids

    def refused(rid: str) -> list[int]:
        raise AssertionError(f"the model runner asked the KV-cache manager for {rid}'s block ids")

    def execute(out: SchedulerOutput, *args: Any, **kwargs: Any) -> Any:
        for s in out.scheduled:
            rid = s.request.request_id
            seen.append((rid, list(s.block_ids), list(real_get(rid))))
            assert len(s.block_ids) * engine.cache_config.block_size >= s.start + s.num_tokens, rid
        kv.get_block_ids = refused
        try:
            return real_execute(out, *args, **kwargs)
        finally:
            del kv.get_block_ids  # back to the class's method

    runner.execute = execute
    return seen


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(sorted(SETTINGS)),
    prompts=st.lists(st.integers(1, 14), min_size=1, max_size=5),
    n=st.integers(1, 3),
    max_tokens=st.integers(1, 9),
)
def test_every_scheduled_request_carries_its_block_table(
    mode: str, prompts: list[int], n: int, max_tokens: int
) -> None:
    """Under preemption (recompute and swap), prefix hits, fork copy-on-write and static batching, the
    block ids the output carries are the manager's table as the forward pass runs, and the tokens are
    those of an engine whose runner is not watched."""
    runs = []
    for watched in (False, True):
        engine = tiny_engine(**SETTINGS[mode])
        seen = _watch(engine) if watched else []
        for i, length in enumerate(prompts):
            ids = [(7 * i + j) % 90 + 1 for j in range(length)]
            try:
                engine.add_request(f"r{i}", ids, greedy(max_tokens, n if i == 0 else 1))
            except InvalidRequestError:  # refused up front: n sequences that could never fit the pool
                assume(False)
        outs = run_to_completion(engine, 400)
        assert_idle(engine)
        runs.append({rid: [c.token_ids for c in o.outputs] for rid, o in outs.items()})
        for rid, carried, table in seen:
            assert carried == table, (rid, carried, table)
    assert seen, "the runner executed nothing"
    assert runs[0] == runs[1]


@pytest.mark.parametrize("cls", [Scheduler, StaticScheduler])
def test_finish_schedule_fills_block_ids_whoever_scheduled(cls: type[Scheduler]) -> None:
    """``block_ids`` is set in ``finish_schedule``, the end every scheduler shares (continuous, static,
    a learner's step from ``pagedlab.parts``)."""
    kv = KVCacheManager(block_size=4, num_gpu_blocks=16, max_model_len=64)
    s = cls(SchedulerConfig(max_model_len=64), CacheConfig(block_size=4, num_gpu_blocks=16), kv)
    from tests.sched.helpers import req

    s.add_request(req("a", 9, max_tokens=8))
    out = s.schedule()
    (a,) = out.scheduled
    assert a.block_ids == kv.get_block_ids("a") and len(a.block_ids) == 3


def test_parts_reach_scheduler_and_runner_through_constructors() -> None:
    """A learner's part is in place when the scheduler and the model runner are built; falling back to
    the kit's builds a new runner on the same KV tensors and leaves the old one unchanged."""
    from pagedlab.kernels.paged_kv import kit_slot_mapping

    def mine(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
        return kit_slot_mapping(block_table, positions, block_size)

    engine = tiny_engine(components=Components.kit().plug("slot_mapping", mine))
    runner = engine.model_runner
    assert runner.slot_mapping_fn is not None and engine.components.is_yours("slot_mapping")
    kit = runner.with_parts(None, None, None)
    assert kit.slot_mapping_fn is None and runner.slot_mapping_fn is not None
    assert kit.kv_caches is runner.kv_caches and kit.model is runner.model
