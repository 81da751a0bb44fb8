"""``abort_request`` in every state a request can be in: its blocks (device and swap) all come back,
the engine's invariants hold, the other requests finish with the tokens they would have had."""

from __future__ import annotations

from typing import Any

import pytest

from pagedlab import LLMEngine
from pagedlab.errors import InvalidRequestError
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


@pytest.mark.parametrize(
    "ids, match",
    [
        ([7], r"request ids are strings: abort_request got int 7 \(add_request keeps the id 7 as '7'\)"),
        (7, r"abort_request takes a request id \(str\) or a list of them, got int 7 \(add_request keeps"),
        (None, r"abort_request takes a request id \(str\) or a list of them, got NoneType None"),
        (["7", None], r"request ids are strings: abort_request got NoneType None"),
    ],
)
def test_abort_with_an_id_that_is_not_a_str_is_refused_and_aborts_nothing(ids: Any, match: str) -> None:
    """Found by trying the kit as a learner: ``add_request(7, ...)`` keeps the id as '7', and
    ``abort_request([7])`` then skipped it silently (the request ran on to the end); ``abort_request(7)``
    raised "'int' object is not iterable". Now a non-str id is refused, before anything is aborted (a list
    mixing a good id with a bad one aborts neither)."""
    engine = tiny_engine()
    assert engine.add_request(7, {"prompt_token_ids": OTHER}, greedy(6)) == "7"
    engine.step()
    with pytest.raises(InvalidRequestError, match=match):
        engine.abort_request(ids)
    assert engine.scheduler.requests["7"].status == RequestStatus.RUNNING  # not aborted
    outs = run_to_completion(engine, 50)
    assert outs["7"].outputs[0].token_ids == _reference() and outs["7"].outputs[0].finish_reason == "length"
    assert_idle(engine)


def test_abort_of_an_unknown_str_id_is_skipped_as_in_vllm() -> None:
    """vLLM's ``abort_request`` skips ids it does not know (one may have finished meanwhile): so does the kit."""
    engine = tiny_engine()
    engine.add_request("a", {"prompt_token_ids": OTHER}, greedy(6))
    engine.abort_request(["nope", "a"])
    assert not engine.has_unfinished_requests()
    assert_idle(engine)
