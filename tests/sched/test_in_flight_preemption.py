"""vLLM 0.32's rule for a request preempted while its batch is in flight (``schedule`` called again before
``update_from_output``, as vLLM's async scheduling and its scheduler unit tests do): the batch's token is
still appended (``Scheduler.update_from_output`` delivers "stale" output, ``vllm/v1/core/sched/scheduler.py``
``_preempt_request`` / ``update_from_output``), and the request resumes with it."""

from pagedlab.request import RequestStatus
from tests.sched.helpers import make, req


def preempted_in_flight(b_max_tokens=8):
    """a (12-token prompt, chunks of 4) and b (3 tokens) share 3 blocks of 4; b's decode is in flight
    when the next ``schedule`` needs a's third block and preempts b (fcfs: the newest)."""
    s, kv = make(num_blocks=3, bs=4, max_num_batched_tokens=8, long_prefill_token_threshold=4)
    s.add_request(req("a", 12, max_tokens=8))
    s.add_request(req("b", 3, max_tokens=b_max_tokens))
    first = s.schedule()
    assert [(x.request.request_id, x.num_tokens) for x in first.scheduled] == [("a", 4), ("b", 3)]
    s.update_from_output(first, {"b": 7})
    in_flight = s.schedule()
    assert [(x.request.request_id, x.num_tokens) for x in in_flight.scheduled] == [("a", 4), ("b", 1)]
    again = s.schedule()  # before in_flight's update
    assert again.preempted == ["b"] and s.requests["b"].status == RequestStatus.PREEMPTED
    return s, kv, in_flight


def test_a_request_preempted_in_flight_keeps_the_batchs_token():
    s, kv, in_flight = preempted_in_flight()
    b = s.requests["b"]
    assert s.update_from_output(in_flight, {"b": 9}) == []
    assert b.output_token_ids == [7, 9]  # vLLM 0.32 appends it; the kit used to drop it
    assert b.num_tokens == 5 and b.num_computed_tokens == 0  # resumes by recomputing prompt + both tokens
    assert s.waiting.peek_request() is b


def test_a_request_preempted_in_flight_that_stops_leaves_the_waiting_queue():
    s, kv, in_flight = preempted_in_flight(b_max_tokens=2)
    done = s.update_from_output(in_flight, {"b": 9})  # b's second token: max_tokens reached
    assert [r.request_id for r in done] == ["b"] and done[0].get_finished_reason() == "length"
    assert "b" not in s.requests and len(s.waiting) == 0
