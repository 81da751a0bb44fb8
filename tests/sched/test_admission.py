"""Admission of waiting requests: strict head-of-line order, ``max_num_seqs`` seats, nothing admitted
in a step that preempted, prefix hits looked up once, static batching as the baseline."""

import pytest

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.errors import InvalidRequestError
from pagedlab.request import Request
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import Scheduler
from pagedlab.sched.static import StaticScheduler
from tests.sched.helpers import make, req, run_to_end, step


def test_max_num_seqs_limits_running():
    s, _ = make(max_num_seqs=2)
    for i in range(4):
        s.add_request(req(str(i), 3))
    out = s.schedule()
    assert len(out.scheduled) == 2 and len(s.waiting) == 2


def test_priority_queue_orders_by_priority_then_arrival():
    s, _ = make(policy="priority", max_num_seqs=1)
    s.add_request(req("late-important", 2, arrival=5, priority=0))
    s.add_request(req("early-unimportant", 2, arrival=0, priority=3))
    s.add_request(req("early-important", 2, arrival=1, priority=0))
    assert [r.request_id for r in s.waiting] == ["early-important", "late-important", "early-unimportant"]


def test_static_batch_admits_nobody_until_it_finishes():
    s, _ = make(cls=StaticScheduler, max_num_seqs=2)
    s.add_request(req("a", 3, max_tokens=2))
    s.add_request(req("b", 3, max_tokens=6))
    s.add_request(req("c", 3, max_tokens=2))
    seen = []
    for out in run_to_end(s):
        seen.append({x.request.request_id for x in out.scheduled})
    first_c = next(i for i, ids in enumerate(seen) if "c" in ids)
    last_b = max(i for i, ids in enumerate(seen) if "b" in ids)
    assert first_c > last_b, "c joined while the static batch (a, b) was still running"


def test_nothing_is_admitted_in_a_step_that_preempted_even_if_it_would_fit():
    # Priority queue: after b is preempted, c (more important) heads the waiting queue and would fit
    # in the blocks b freed, yet must wait for the next step (vLLM v1, engines.md §1.5 step 2).
    s, kv = make(num_blocks=4, bs=4, policy="priority", max_num_batched_tokens=64)
    s.add_request(req("a", 4, max_tokens=6, arrival=0, priority=0))
    s.add_request(req("b", 8, max_tokens=6, arrival=1, priority=5))
    step(s)
    s.add_request(req("c", 2, arrival=2, priority=0))
    out = step(s)
    assert out.preempted == ["b"]
    assert "c" not in out.num_scheduled_tokens, "c was admitted in the step that preempted b"
    assert s.waiting.peek_request().request_id == "c" and kv.num_free_blocks >= 1
    assert "c" in step(s).num_scheduled_tokens, "c is admitted in the next step"


def test_prefix_cache_hit_is_counted_once_per_admission_not_per_lookup():
    from pagedlab.trace import Tracer

    t = Tracer()
    kv = KVCacheManager(block_size=4, num_gpu_blocks=5, max_model_len=512, enable_caching=True, hash_seed=0, tracer=t)
    s = Scheduler(
        SchedulerConfig(max_model_len=512, max_num_batched_tokens=64),
        CacheConfig(block_size=4, num_gpu_blocks=5),
        kv,
        tracer=t,
    )
    mk = lambda rid, toks, mt: Request(
        rid,
        toks,
        SamplingParams(max_tokens=mt, ignore_eos=True),  # noqa: E731
        block_hasher=kv.block_hasher,
    )
    s.add_request(mk("a", list(range(1, 13)), 8))  # 3 blocks now, grows to 5
    step(s)
    s.add_request(mk("b", list(range(1, 9)) + [99] * 8, 1))  # hits a's 2 first blocks, needs 2 more
    lookups = 0
    real = kv.get_computed_blocks

    def counting(r):
        nonlocal lookups
        lookups += 1
        return real(r)

    kv.get_computed_blocks = counting
    while "b" not in {x.request.request_id for x in step(s).scheduled}:
        pass
    assert lookups >= 2, "b was meant to wait (and be looked up again) before it fit"
    hits = [e for e in t.events if e["kind"] == "cache_hit"]
    assert [(e["request_id"], e["num_tokens"], e["preempted"]) for e in hits] == [("a", 0, False), ("b", 8, False)]
    st = kv.make_prefix_cache_stats()
    assert (st.requests, st.queries, st.hits) == (2, 12 + 16, 8)


def test_max_num_seqs_reserves_n_seats_for_a_request_that_will_fork():
    s, _ = make(max_num_seqs=3)
    s.add_request(req("a", 4))
    wide = Request("w", [1, 2, 3], SamplingParams(max_tokens=2, n=3, ignore_eos=True))
    s.add_request(wide)
    assert [x.request.request_id for x in s.schedule().scheduled] == ["a"], "w needs 3 seats, 2 are left"
    assert len(s.waiting) == 1


def test_a_running_request_that_has_not_forked_yet_keeps_its_n_seats():
    s, _ = make(max_num_seqs=3, max_num_batched_tokens=2, enable_chunked_prefill=True)
    wide = Request("w", [1, 2, 3], SamplingParams(max_tokens=2, n=3, ignore_eos=True))
    s.add_request(wide)
    s.add_request(req("a", 1))
    out = step(s)  # w's first chunk: 2 of 3 prompt tokens, no fork yet
    assert out.num_scheduled_tokens == {"w": 2} and wide.num_output_tokens == 0
    assert s.running == [wide] and [r.request_id for r in s.waiting] == ["a"], "w holds 3 of 3 seats"
    out = step(s)
    assert out.num_scheduled_tokens == {"w": 1}, "a stays out although only one request runs"
    assert [r.request_id for r in s.waiting] == ["a"]


def test_any_string_is_a_request_id_and_fork_groups_are_not_parsed_from_ids():
    s, kv = make(num_blocks=32, bs=4, cpu=32, preemption_mode="swap")
    s.add_request(req("a#1", 6, max_tokens=3))
    s.add_request(req("a", 6, max_tokens=3))
    step(s)
    a, a1 = s.requests["a"], s.requests["a#1"]
    child = Request("b", list(a.all_token_ids[:6]), a.sampling_params)
    child.append_output_token_ids(list(a.output_token_ids))
    s.fork_request(a, child)
    assert s.get_fork_group(a) == [a, child] and s.get_fork_group(a1) == [a1]
    with pytest.raises(InvalidRequestError):
        s.fork_request(a, Request("a#1", list(a.all_token_ids), a.sampling_params))
    with pytest.raises(InvalidRequestError):
        s.fork_request(Request("ghost", [1, 2]), Request("g2", [1, 2]))
    run_to_end(s)
    assert kv.num_free_blocks == 32 and not s.requests


def test_a_waiting_head_that_does_not_fit_blocks_the_requests_behind_it():
    # 4 blocks of 4: "a" holds 3 after its first decode; "big" (3 blocks) does not fit, "small" (1) would.
    s, kv = make(num_blocks=4, bs=4, max_num_batched_tokens=64)
    s.add_request(req("a", 8, max_tokens=8))
    step(s)
    s.add_request(req("big", 12))
    s.add_request(req("small", 2))
    out = s.schedule()
    assert [x.request.request_id for x in out.scheduled] == ["a"] and kv.num_free_blocks == 1
    assert [r.request_id for r in s.waiting] == ["big", "small"], "strict head-of-line order: small waits"
