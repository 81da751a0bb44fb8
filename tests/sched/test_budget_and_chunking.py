"""The token budget and chunked prefill: running requests first, every step within
``max_num_batched_tokens``, chunks capped by ``long_prefill_token_threshold``; the postcondition checks."""

import pytest

from pagedlab.request import RequestStatus
from tests.sched.helpers import make, req, run_to_end, step


def test_running_first_then_waiting_and_budget_respected():
    s, _ = make(max_num_batched_tokens=10, max_num_seqs=8)
    s.add_request(req("a", 8))
    s.add_request(req("b", 8))
    out = step(s)
    assert [(x.request.request_id, x.num_tokens) for x in out.scheduled] == [("a", 8), ("b", 2)]
    out2 = step(s)  # a decodes first (running), then b continues its prefill
    assert [(x.request.request_id, x.num_tokens) for x in out2.scheduled] == [("a", 1), ("b", 6)]


def test_long_prefill_token_threshold_caps_each_chunk():
    s, _ = make(max_num_batched_tokens=100, long_prefill_token_threshold=5)
    s.add_request(req("a", 12))
    s.add_request(req("b", 3))
    chunks = [[(x.request.request_id, x.start, x.num_tokens) for x in s.schedule().scheduled] for _ in range(3)]
    assert chunks[0] == [("a", 0, 5), ("b", 0, 3)]
    assert chunks[1][0] == ("a", 5, 5) and chunks[2][0] == ("a", 10, 2)


def test_a_lone_request_is_not_capped_by_the_threshold():
    # vLLM 0.32.0 ``Scheduler.schedule``: the threshold applies only when more than one request is
    # unfinished (running + waiting) as the step starts; a lone prefill takes the whole budget. 0.11 capped it.
    s, _ = make(max_num_batched_tokens=100, long_prefill_token_threshold=5)
    s.add_request(req("a", 12))
    assert [(x.request.request_id, x.num_tokens) for x in step(s).scheduled] == [("a", 12)]
    s2, _ = make(max_num_batched_tokens=12, long_prefill_token_threshold=5)
    s2.add_request(req("a", 30))
    assert [(x.request.request_id, x.num_tokens) for x in step(s2).scheduled] == [("a", 12)]  # the budget
    s2.add_request(req("b", 3))  # a is running, b waits: two unfinished requests, a is capped again
    assert [(x.request.request_id, x.num_tokens) for x in step(s2).scheduled] == [("a", 5), ("b", 3)]
    s2.finish_requests("b", RequestStatus.FINISHED_ABORTED)  # alone again: only the budget limits a
    assert [(x.request.request_id, x.num_tokens) for x in step(s2).scheduled] == [("a", 12)]


def test_without_chunked_prefill_the_threshold_applies_before_the_fit_check():
    # vLLM (0.11 and 0.32): n = min(gap, threshold) first; only an n above the budget is refused. A 12-token
    # prompt with threshold 5 fits a budget of 8 as a 5-token chunk; a 9-token gap capped to 9 would not.
    # A second request keeps the threshold on (a lone request is not capped, vLLM 0.32).
    s, kv = make(max_num_batched_tokens=8, long_prefill_token_threshold=5, enable_chunked_prefill=False)
    s.add_request(req("a", 12))
    s.add_request(req("z", 3))
    out = s.schedule()
    assert [(x.request.request_id, x.start, x.num_tokens) for x in out.scheduled] == [("a", 0, 5), ("z", 0, 3)]
    assert s.requests["a"].num_computed_tokens == 5 and s.requests["a"].status == RequestStatus.RUNNING
    assert len(s.waiting) == 0 and kv.get_block_ids("a") != []
    s2, kv2 = make(max_num_batched_tokens=8, long_prefill_token_threshold=10, enable_chunked_prefill=False)
    b = req("b", 12)
    s2.add_request(b)
    s2.add_request(req("y", 3))
    before = kv2.num_free_blocks
    out2 = s2.schedule()
    # A capped chunk above max_num_batched_tokens can never be scheduled: it is rejected (the
    # progress guarantee, issue 16) rather than clipped to the budget or left waiting forever.
    assert out2.rejected == [b] and b.status == RequestStatus.FINISHED_ABORTED
    assert [x.request.request_id for x in out2.scheduled] == ["y"]
    assert "b" not in s2.requests and kv2.num_free_blocks == before - 1


def test_postconditions_are_checked_every_step_in_tests():
    import os

    from pagedlab.sched.scheduler import CHECK_INVARIANTS_ENV

    assert os.environ.get(CHECK_INVARIANTS_ENV) == "1"
    s, kv = make(max_num_batched_tokens=16)
    assert s.check_postconditions
    s.add_request(req("a", 6))
    kv.allocate_slots = lambda r, n, *a, **kw: []  # "allocates" without giving the tokens a slot
    with pytest.raises(AssertionError, match="step 0: a: tokens up to 6 but only 0 blocks"):
        s.schedule()
    s2, _ = make(max_num_batched_tokens=16, max_num_seqs=1)
    s2.add_request(req("b", 6))
    out = s2.schedule()
    s2._check_postconditions(out, 10)  # what the step left: fine
    with pytest.raises(AssertionError, match="token budget left -1"):
        s2._check_postconditions(out, -1)
    s2.running.append(req("c", 2))
    with pytest.raises(AssertionError, match="2 running requests > max_num_seqs=1"):
        s2._check_postconditions(out, 10)


def test_postcondition_checks_are_off_without_the_environment_variable(monkeypatch):
    from pagedlab.sched.scheduler import CHECK_INVARIANTS_ENV

    monkeypatch.setenv(CHECK_INVARIANTS_ENV, "0")
    s, kv = make()
    assert not s.check_postconditions
    s._check_postconditions = lambda *a: pytest.fail("checked although turned off")
    s.add_request(req("a", 6))
    run_to_end(s)
