"""Ending requests: finish reasons (stop token, EOS, length, abort), aborts in every state, and the
engine's recovery (``drop_all_requests``)."""

import pytest

from pagedlab.request import Request, RequestStatus
from pagedlab.sampling_params import SamplingParams
from tests.sched.helpers import make, req, run_to_end, step


@pytest.mark.parametrize("where", ["waiting", "running", "swapped"])
def test_abort_frees_everything(where):
    s, kv = make(num_blocks=3, bs=4, cpu=8, preemption_mode="swap", max_num_batched_tokens=64)
    s.add_request(req("a", 4, max_tokens=6, arrival=0))
    s.add_request(req("b", 4, max_tokens=6, arrival=1))
    step(s)
    if where == "swapped":
        step(s)  # b gets swapped out
        assert s.requests["b"].status == RequestStatus.SWAPPED
    elif where == "waiting":
        s.add_request(req("c", 4, arrival=2))
    target = {"waiting": "c", "running": "a", "swapped": "b"}[where]
    s.finish_requests(target, RequestStatus.FINISHED_ABORTED)
    assert target not in s.requests
    assert target not in kv.req_to_blocks and target not in kv.req_to_cpu_blocks
    run_to_end(s)
    assert kv.num_free_blocks == 3 and kv.cpu_block_pool.get_num_free_blocks() == 8


def test_stop_conditions():
    s, _ = make()
    r = Request("e", [1, 2, 3], SamplingParams(max_tokens=10), eos_token_id=7)
    s.add_request(r)
    step(s)
    assert r.status == RequestStatus.FINISHED_STOPPED and r.get_finished_reason() == "stop"
    r2 = req("l", 3, max_tokens=2)
    s.add_request(r2)
    run_to_end(s)
    assert r2.status == RequestStatus.FINISHED_LENGTH_CAPPED and r2.num_output_tokens == 2


def test_drop_all_requests_forgets_queues_and_fork_groups_without_freeing():
    s, kv = make(num_blocks=32, bs=4)
    s.add_request(req("p", 6, max_tokens=3))
    s.add_request(req("q", 6, max_tokens=3))
    step(s)
    s.add_request(req("w", 6))
    p, q, w = s.requests["p"], s.requests["q"], s.requests["w"]
    c = Request("c", list(p.prompt_token_ids), p.sampling_params)
    c.append_output_token_ids(list(p.output_token_ids))
    s.fork_request(p, c)
    held = kv.num_free_blocks
    assert s.drop_all_requests() == {"p": p, "q": q, "w": w, "c": c}
    assert not s.requests and not s.running and not s.swapped and not len(s.waiting) and s._fork_groups == {}
    assert not s.has_unfinished_requests() and kv.num_free_blocks == held, "blocks are the caller's to free"
    for r in (p, q, c):
        kv.free(r)
    p2 = req("p", 6, max_tokens=3)  # an id reused after recovery joins no stale group
    s.add_request(p2)
    step(s)
    c2 = Request("c", list(p2.prompt_token_ids), p2.sampling_params)
    c2.append_output_token_ids(list(p2.output_token_ids))
    s.fork_request(p2, c2)
    assert s.get_fork_group(p2) == [p2, c2]
    run_to_end(s)
    assert kv.num_free_blocks == 32 and s._fork_groups == {}


def test_finish_reasons_of_a_stop_token_the_length_and_an_abort():
    s, _ = make()
    stop = Request("s", [1, 2, 3], SamplingParams(max_tokens=10, stop_token_ids=[7], ignore_eos=True))
    length = req("l", 3, max_tokens=2)
    aborted = req("x", 3, max_tokens=10)
    for r in (stop, length, aborted):
        s.add_request(r)
    step(s)
    assert s.finish_requests("x", RequestStatus.FINISHED_ABORTED) == [aborted]
    run_to_end(s)
    assert (stop.get_finished_reason(), stop.stop_reason, stop.num_output_tokens) == ("stop", 7, 1)
    assert (length.get_finished_reason(), length.num_output_tokens) == ("length", 2)
    assert (aborted.get_finished_reason(), aborted.num_output_tokens) == ("abort", 1)
    assert s.finish_requests("x", RequestStatus.FINISHED_ABORTED) == [], "a finished request is not ended twice"
