"""Preemption: one loop (``preempt_retry_fn``, the kit's ``preempt_and_retry``) with the victim from
``pick_victim_fn`` (FCFS: the newest; priority: the largest ``(priority, arrival)``), recompute and swap."""

from pagedlab.request import Request, RequestStatus
from pagedlab.sched.scheduler import pick_victim, preempt_and_retry
from tests.sched.helpers import make, out_of_pool, req, run_to_end, step


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


def test_progress_when_memory_is_just_above_one_long_request():
    # 6 blocks = 24 tokens; each request needs 5 blocks at its end: only one can finish at a time.
    s, kv = make(num_blocks=6, bs=4, max_num_batched_tokens=64)
    for i in range(5):
        s.add_request(req(str(i), 12, max_tokens=8, arrival=i))
    run_to_end(s)
    assert kv.num_free_blocks == 6
    assert not s.requests


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


def test_the_running_phase_preempts_through_its_one_loop_with_the_chosen_victim():
    """Every allocation of the running phase goes through ``preempt_retry_fn``, victims through
    ``pick_victim_fn``: replacing them is all it takes to change how the scheduler preempts."""
    loops, choices = [], []

    def recording_loop(request, allocate, choose_victim, preempt):
        loops.append(request.request_id)
        return preempt_and_retry(request, allocate, choose_victim, preempt)

    def oldest(running, policy):
        choices.append([r.request_id for r in running])
        return running[0]

    s, kv = make(num_blocks=3, bs=4, max_num_batched_tokens=64)
    assert s.preempt_retry_fn is preempt_and_retry and s.pick_victim_fn is pick_victim  # the kit's by default
    parts = {"preempt_retry_fn": recording_loop, "pick_victim_fn": oldest}  # given to the constructor
    s, kv = make(num_blocks=3, bs=4, max_num_batched_tokens=64, parts=parts)
    s.add_request(req("a", 4, max_tokens=6, arrival=0))
    s.add_request(req("b", 4, max_tokens=6, arrival=1))
    step(s)  # both admitted from waiting: no running-phase allocation yet
    assert loops == []
    out = s.schedule()
    # a's second block fits; b's does not: b's loop preempts the victim chosen (the oldest, a), whose
    # scheduled tokens are refunded, and retries with a's blocks.
    assert loops == ["a", "b"] and choices == [["a", "b"]]
    assert out.preempted == ["a"] and [x.request.request_id for x in out.scheduled] == ["b"]
    assert s.requests["a"].status == RequestStatus.PREEMPTED and s.waiting.peek_request() is s.requests["a"]


def test_preempt_and_retry_stops_when_the_allocation_succeeds_or_the_request_itself_goes():
    calls = []
    r = req("r", 4)
    r.status = RequestStatus.RUNNING
    results = iter([False, False, True])
    got = preempt_and_retry(
        r, lambda: calls.append("alloc") or next(results), lambda: "v", lambda v: calls.append(f"preempt {v}")
    )
    assert got is True and calls == ["alloc", "preempt v", "alloc", "preempt v", "alloc"]

    def preempt_self(victim):
        calls.append("self")
        r.status = RequestStatus.PREEMPTED

    calls.clear()
    r.status = RequestStatus.RUNNING
    assert preempt_and_retry(r, lambda: calls.append("alloc") and False, lambda: r, preempt_self) is False
    assert calls == ["alloc", "self"], "after the request itself was preempted, nothing is allocated for it"
