"""Scheduler semantics (vLLM v1 shape, engines.md §1.5), checked without a model.

A fake "model" samples token 7 for every request that reaches the end of its sequence.
"""

import pytest

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.errors import InvalidRequestError
from pagedlab.request import Request, RequestStatus
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import Scheduler
from pagedlab.sched.static import StaticScheduler


def make(num_blocks=64, bs=4, cpu=0, cls=Scheduler, **sched):
    kv = KVCacheManager(block_size=bs, num_gpu_blocks=num_blocks, max_model_len=512, num_cpu_blocks=cpu)
    s = cls(
        SchedulerConfig(max_model_len=512, **sched),
        CacheConfig(block_size=bs, num_gpu_blocks=num_blocks, num_cpu_blocks=cpu),
        kv,
    )
    return s, kv


def req(rid, n_prompt, max_tokens=4, arrival=0.0, priority=0):
    return Request(
        rid,
        list(range(1, n_prompt + 1)),
        SamplingParams(max_tokens=max_tokens, ignore_eos=True),
        arrival_time=arrival,
        priority=priority,
    )


def step(s):
    out = s.schedule()
    sampled = {x.request.request_id: 7 for x in out.scheduled if x.samples}
    s.update_from_output(out, sampled)
    return out


def run_to_end(s, limit=10_000):
    outs = []
    for _ in range(limit):
        if not s.has_unfinished_requests():
            return outs
        outs.append(step(s))
    raise AssertionError("scheduler did not finish: livelock")


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


def test_max_num_seqs_limits_running():
    s, _ = make(max_num_seqs=2)
    for i in range(4):
        s.add_request(req(str(i), 3))
    out = s.schedule()
    assert len(out.scheduled) == 2 and len(s.waiting) == 2


def test_fcfs_preempts_the_newest_and_admits_nothing_that_step():
    # 3 blocks of 4 tokens: a and b each hold one full block; decoding needs a second block each.
    s, kv = make(num_blocks=3, bs=4, max_num_batched_tokens=64)
    s.add_request(req("a", 4, max_tokens=6, arrival=0))
    s.add_request(req("b", 4, max_tokens=6, arrival=1))
    step(s)
    s.add_request(req("c", 2, arrival=2))
    out = s.schedule()
    assert out.preempted == ["b"], "fcfs must preempt the most recently admitted request"
    assert [x.request.request_id for x in out.scheduled] == ["a"], "nothing is admitted in a step that preempted"
    b = s.requests["b"]
    assert b.status == RequestStatus.PREEMPTED and b.num_computed_tokens == 0 and b.num_output_tokens == 1
    assert s.waiting.peek_request() is b, "a preempted request goes back to the head of the queue"


def test_priority_preempts_largest_priority_then_latest_arrival():
    s, kv = make(num_blocks=3, bs=4, policy="priority", max_num_batched_tokens=64)
    s.add_request(req("low", 4, max_tokens=6, arrival=0, priority=5))
    s.add_request(req("high", 4, max_tokens=6, arrival=1, priority=0))
    step(s)
    out = s.schedule()
    assert out.preempted == ["low"], "priority mode preempts the largest priority value"
    assert [x.request.request_id for x in out.scheduled] == ["high"]


def test_priority_queue_orders_by_priority_then_arrival():
    s, _ = make(policy="priority", max_num_seqs=1)
    s.add_request(req("late-important", 2, arrival=5, priority=0))
    s.add_request(req("early-unimportant", 2, arrival=0, priority=3))
    s.add_request(req("early-important", 2, arrival=1, priority=0))
    assert [r.request_id for r in s.waiting] == ["early-important", "late-important", "early-unimportant"]


def test_progress_when_memory_is_just_above_one_long_request():
    # 6 blocks = 24 tokens; each request needs 5 blocks at its end: only one can finish at a time.
    s, kv = make(num_blocks=6, bs=4, max_num_batched_tokens=64)
    for i in range(5):
        s.add_request(req(str(i), 12, max_tokens=8, arrival=i))
    run_to_end(s)
    assert kv.num_free_blocks == 6
    assert not s.requests


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


def test_swap_preemption_keeps_computed_tokens_and_comes_back():
    s, kv = make(num_blocks=3, bs=4, cpu=8, preemption_mode="swap", max_num_batched_tokens=64)
    s.add_request(req("a", 4, max_tokens=6, arrival=0))
    s.add_request(req("b", 4, max_tokens=6, arrival=1))
    step(s)
    out = step(s)
    b = s.requests["b"]
    assert out.blocks_to_swap_out and b.status == RequestStatus.SWAPPED
    assert b.num_computed_tokens == 4, "swap keeps the KV: nothing to recompute"
    run_to_end(s)
    assert kv.num_free_blocks == 3


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


def test_without_chunked_prefill_the_threshold_applies_before_the_fit_check():
    # vLLM 0.11: n = min(gap, threshold) first; only an n above the budget is refused. A 12-token
    # prompt with threshold 5 fits a budget of 8 as a 5-token chunk; a 9-token gap capped to 9 would not.
    s, kv = make(max_num_batched_tokens=8, long_prefill_token_threshold=5, enable_chunked_prefill=False)
    s.add_request(req("a", 12))
    out = s.schedule()
    assert [(x.request.request_id, x.start, x.num_tokens) for x in out.scheduled] == [("a", 0, 5)]
    assert s.requests["a"].num_computed_tokens == 5 and s.requests["a"].status == RequestStatus.RUNNING
    assert len(s.waiting) == 0 and kv.get_block_ids("a") != []
    s2, kv2 = make(max_num_batched_tokens=8, long_prefill_token_threshold=10, enable_chunked_prefill=False)
    b = req("b", 12)
    s2.add_request(b)
    before = kv2.num_free_blocks
    out2 = s2.schedule()
    # A capped chunk above max_num_batched_tokens can never be scheduled: it is rejected (the
    # progress guarantee, issue 16) rather than clipped to the budget or left waiting forever.
    assert out2.scheduled == [] and out2.rejected == [b] and b.status == RequestStatus.FINISHED_ABORTED
    assert len(s2.waiting) == 0 and not s2.requests and kv2.num_free_blocks == before


def out_of_pool(kv):
    return kv.num_free_blocks


def _fork_group_under_swap_pressure():
    """x runs; p (10 tokens: 2 full blocks + 2 tokens) is forked into c, the newest running request."""
    s, kv = make(num_blocks=6, bs=4, cpu=16, preemption_mode="swap", max_num_batched_tokens=64)
    s.add_request(req("x", 4, max_tokens=20, arrival=0))
    s.add_request(req("p", 10, max_tokens=4, arrival=1))
    step(s)  # x and p prefilled, each sampled one token
    p = s.requests["p"]
    c = Request("c", list(p.prompt_token_ids), p.sampling_params, arrival_time=0)
    c.append_output_token_ids(list(p.output_token_ids))
    s.fork_request(p, c)
    return s, kv, p, c


def test_swap_preemption_moves_the_whole_fork_group_and_keeps_sharing():
    s, kv, p, c = _fork_group_under_swap_pressure()
    assert s.get_fork_group(c) == [p, c] and s.get_fork_group(p) == [p, c]
    shared = kv.get_block_ids("p")
    assert kv.get_block_ids("c") == shared and kv.num_held_blocks() == 4  # 3 shared + x's
    step(s)  # p and c decode (CoW of the last block), x too
    assert out_of_pool(kv) == 0
    tables_before = {r: kv.get_block_ids(r) for r in ("p", "c")}
    held_before = len(set(tables_before["p"]) | set(tables_before["c"]))
    assert held_before == 4
    assert tables_before["p"][:2] == tables_before["c"][:2], "the two full blocks are shared"
    out = None
    for _ in range(20):  # the group grows until the pool forces a preemption
        out = step(s)
        if out.preempted:
            break
    assert sorted(out.preempted) == ["c", "p"], "the whole fork group is swapped out together"
    assert p.status == c.status == RequestStatus.SWAPPED and sorted(r.request_id for r in s.swapped) == ["c", "p"]
    assert "x" in out.num_scheduled_tokens and s.requests["x"].status == RequestStatus.RUNNING
    assert len(out.blocks_to_swap_out) == held_before, "each shared block is moved once"
    cpu = kv.req_to_cpu_blocks
    assert [b.block_id for b in cpu["p"][:2]] == [b.block_id for b in cpu["c"][:2]]
    assert all(b.ref_cnt == 2 for b in cpu["p"][:2])
    while True:  # x finishes, then the group comes back whole
        out = s.schedule()
        if out.blocks_to_swap_in:
            break
        s.update_from_output(out, {x.request.request_id: 7 for x in out.scheduled if x.samples})
    assert p.status == c.status == RequestStatus.RUNNING and not s.swapped
    assert sorted(out.num_scheduled_tokens) == ["c", "p"]
    assert len(out.blocks_to_swap_in) == held_before
    tp, tc = kv.get_block_ids("p"), kv.get_block_ids("c")
    assert tp[:2] == tc[:2] and all(kv.block_pool.blocks[b].ref_cnt == 2 for b in tp[:2])
    assert len(set(tp[:3]) | set(tc[:3])) == held_before, "2 shared blocks stay 2 after swap out + in"
    assert p.num_computed_tokens == c.num_computed_tokens
    s.update_from_output(out, {x.request.request_id: 7 for x in out.scheduled if x.samples})
    run_to_end(s)
    assert kv.num_free_blocks == 6 and kv.cpu_block_pool.get_num_free_blocks() == 16
    assert s._fork_groups == {}


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


def test_postconditions_are_checked_every_step_in_tests():
    import os

    from pagedlab.sched.scheduler import CHECK_INVARIANTS_ENV

    assert os.environ.get(CHECK_INVARIANTS_ENV) == "1"
    s, kv = make(max_num_batched_tokens=16)
    assert s.check_postconditions
    s.add_request(req("a", 6))
    kv.allocate_slots = lambda r, n, *a: []  # "allocates" without giving the tokens a slot
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
