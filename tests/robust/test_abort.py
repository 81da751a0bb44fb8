"""``abort_request`` in every state a request can be in: its blocks (device and swap) all come back,
the engine's invariants hold, the other requests finish with the tokens they would have had."""

from __future__ import annotations

from typing import Any

import pytest

from pagedlab import LLMEngine
from pagedlab.request import RequestStatus
from tests.robust.helpers import (
    assert_idle,
    check_engine,
    greedy,
    run_to_completion,
    tiny_engine,
)

OTHER = [11, 12, 13, 14, 15]


def _reference() -> list[int]:
    engine = tiny_engine()
    engine.add_request("other", {"prompt_token_ids": OTHER}, greedy(6))
    return run_to_completion(engine, 50)["other"].outputs[0].token_ids


def _step_until(engine: LLMEngine, rid: str, status: RequestStatus, limit: int = 40) -> None:
    for _ in range(limit):
        req = engine.scheduler.requests.get(rid)
        if req is not None and req.status == status:
            return
        engine.step()
        check_engine(engine)
    pytest.fail(f"{rid} never reached {status.name}")


def _held(engine: LLMEngine, rid: str) -> int:
    kv = engine.kv_cache_manager
    return sum(len(kv.req_to_blocks.get(r, [])) + len(kv.req_to_cpu_blocks.get(r, [])) for r in (rid, f"{rid}#1"))


@pytest.mark.parametrize(
    "state, kw, n",
    [
        ("waiting", {}, 1),
        ("running mid-prefill", {"max_num_batched_tokens": 4}, 1),
        ("preempted (recompute)", {"num_gpu_blocks": 5}, 1),
        ("swapped", {"num_gpu_blocks": 5, "preemption_mode": "swap", "num_cpu_blocks": 8}, 1),
        ("forked (n=2)", {}, 2),
    ],
)
def test_abort_in_every_state(state: str, kw: dict[str, Any], n: int) -> None:
    engine = tiny_engine(**kw)
    engine.add_request("other", {"prompt_token_ids": OTHER}, greedy(6))
    engine.add_request("victim", {"prompt_token_ids": [1, 2, 3, 4, 5, 6, 7]}, greedy(10, n=n))
    target = {
        "waiting": RequestStatus.WAITING,
        "running mid-prefill": RequestStatus.RUNNING,
        "preempted (recompute)": RequestStatus.PREEMPTED,
        "swapped": RequestStatus.SWAPPED,
        "forked (n=2)": RequestStatus.RUNNING,
    }[state]
    if state != "waiting":
        _step_until(engine, "victim", target)
    victim = engine.scheduler.requests["victim"]
    if state == "running mid-prefill":
        assert victim.num_computed_tokens < victim.num_prompt_tokens
    if state == "forked (n=2)":
        while "victim#1" not in engine.scheduler.requests:
            engine.step()
    if state == "swapped":
        assert engine.kv_cache_manager.req_to_cpu_blocks.get("victim")
    engine.abort_request("victim")
    check_engine(engine)
    assert _held(engine, "victim") == 0
    assert victim.status == RequestStatus.FINISHED_ABORTED
    assert "victim" not in engine.scheduler.requests and "victim#1" not in engine.scheduler.requests
    engine.abort_request("victim")  # twice: a no-op
    engine.abort_request("no-such-request")  # unknown: a no-op
    outs = run_to_completion(engine, 60)
    assert set(outs) == {"other"} and outs["other"].outputs[0].token_ids == _reference()
    assert_idle(engine)
