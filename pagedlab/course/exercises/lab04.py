"""Lab 04 - continuous batching: ``schedule_step(running, waiting, kv_cache_manager, max_num_seqs)``.

The test harness (:class:`Sim`) plays the engine around the learner's function: requests arrive
at given steps, after each step it advances ``num_computed_tokens``, samples a token for every
request whose chunk reached its end, and frees finished requests - as
``pagedlab.sched.scheduler.Scheduler.update_from_output`` does. The reference agrees with the
library's ``Scheduler`` on these workloads (checked in ``tests/grading``). Lab 05 reuses the harness.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.request import Request
from pagedlab.sampling_params import SamplingParams
from pagedlab.viz import empty_step, render_batch_gantt

Arrival = tuple[int, str, int, int]  # (step, request_id, prompt_len, max_tokens)


class Sim:
    """The engine loop around a scheduling function, with plain-data snapshots for the tests."""

    def __init__(
        self, arrivals: Sequence[Arrival], num_gpu_blocks: int = 64, block_size: int = 4, tokens_per_step: int = 1
    ) -> None:
        self.kv = KVCacheManager(block_size, num_gpu_blocks, max_model_len=4096)
        self.block_size = block_size
        #: tokens a request gains when its chunk reaches its end (several, as when speculative decoding
        #: accepts draft tokens): a running request then misses that many tokens, not one
        self.tokens_per_step = tokens_per_step
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.pending = sorted(arrivals)
        self.requests: dict[str, Request] = {}
        self.history: list[dict[str, Any]] = []
        self.step_no = 0

    def arrive(self) -> None:
        while self.pending and self.pending[0][0] <= self.step_no:
            _, rid, plen, max_tokens = self.pending.pop(0)
            req = Request(
                rid,
                [(7 * i + len(rid)) % 97 for i in range(plen)],
                SamplingParams(max_tokens=max_tokens, ignore_eos=True),
                arrival_time=float(self.step_no),
            )
            self.requests[rid] = req
            self.waiting.append(req)

    def done(self) -> bool:
        return not (self.pending or self.running or self.waiting)

    def ids(self, reqs: Any) -> list[Any]:
        return [getattr(r, "request_id", f"<{type(r).__name__}>") for r in reqs]

    def apply(self, scheduled: Any) -> None:
        """Advance the scheduled requests, sample, finish (ignores entries that make no sense)."""
        entries: list[tuple[str, int, bool]] = []
        if isinstance(scheduled, dict):
            for rid, n in list(scheduled.items()):
                req = self.requests.get(rid) if isinstance(rid, str) else None
                if req is None or type(n) is not int or n <= 0 or not any(r is req for r in self.running):
                    continue
                prefill = req.num_computed_tokens < req.num_prompt_tokens or n > 1
                req.num_computed_tokens = min(req.num_computed_tokens + n, req.num_tokens)
                entries.append((rid, n, prefill))
                if req.num_computed_tokens == req.num_tokens:
                    assert req.max_tokens is not None  # arrive() always sets it (an Arrival's int)
                    for _ in range(max(1, min(self.tokens_per_step, req.max_tokens - req.num_output_tokens))):
                        req.append_output_token_ids(1 + req.num_output_tokens % 50)
                    if req.num_output_tokens >= req.max_tokens:
                        self.kv.free(req)
                        self.running = [r for r in self.running if r is not req]
        self.history.append(
            {"step": self.step_no, "scheduled": [list(e) for e in entries], "preempted": [], "finished": []}
        )
        self.step_no += 1

    def state(self) -> dict[str, Any]:
        return {
            "history": self.history[-40:],
            "running": self.ids(self.running),
            "waiting": self.ids(self.waiting),
            "free_blocks": self.kv.num_free_blocks,
        }


def history_steps(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exercise simulator's ``history`` as :func:`pagedlab.viz.batch_steps` rows.

    Args:
        history: ``[{"step", "scheduled": [(req_id, num_tokens, is_prefill)], "preempted"?: [req_id]}]``.

    Returns:
        one row per entry (``preempted`` empty where an entry has none); one empty step 0 when
        ``history`` is empty, so the chart still draws.
    """

    rows = []
    for h in history:
        row = empty_step(h["step"])
        row["scheduled"] = [tuple(e) for e in h["scheduled"]]
        row["preempted"] = list(h.get("preempted", ()))
        rows.append(row)
    return rows or [empty_step(0)]


def render_history(state: dict[str, Any], expected: Any, path: Any) -> str:

    steps = history_steps(state["history"])
    return render_batch_gantt(steps, title="batch per step (your run)" if expected is not None else "batch per step")


def _blocks_hint(expected: Any, got: Any, state: Any) -> str | None:
    """Names the request whose KV reservation differs: slots never reserved, or reserved twice / for nobody."""
    if not isinstance(expected, dict) or not isinstance(got, dict):
        return None
    for rid in sorted(set(expected) | set(got)):
        e, g = expected.get(rid, 0), got.get(rid, 0)
        if type(g) is int and g < e:
            return (
                f"{rid} holds {g} KV block(s) but its tokens need {e}: call "
                "kv_cache_manager.allocate_slots(request, n) for every request you schedule, running ones "
                "included, before the engine computes them"
            )
        if type(g) is int and g > e:
            return (
                f"{rid} holds {g} KV block(s), {e} expected: call allocate_slots once per scheduled request, "
                "and only for a request you actually schedule (a request left waiting must hold no blocks)"
            )
    return None


def _running_hint(expected: Any, got: Any, waiting: list[str]) -> str:
    """Explains a wrong running list; names requests taken off ``waiting`` that never reached the caller's ``running``."""
    lost = [r for r in expected if isinstance(got, list) and r not in got and r not in waiting]
    if lost:
        return (
            f"{', '.join(lost)} left `waiting` but {'is' if len(lost) == 1 else 'are'} not in the `running` list you "
            "were given: append to that "
            "very list (running.append(request)) - binding a new list to the name `running` inside your function "
            "is lost when it returns, the engine keeps its own list"
        )
    return "an admitted request moves from the front of `waiting` to the end of `running`"


def run_workload(
    call: Callable[[Sim], Any],
    rec: Any,
    sim: Sim,
    describe: Callable[[Sim], str],
    hint: Callable[[Any, Any, list[str], dict[str, int]], str | None],
    max_steps: int = 80,
    order_hint: str = (
        "walk `running` in order, oldest first (the engine batches in that order), then add the admitted "
        "requests in queue order"
    ),
) -> None:
    """Step ``sim`` with ``call(sim) -> scheduled`` until every request finished, recording each step.

    Each step records the returned dict, the KV blocks every request holds right after the call, the
    free blocks and every request's ``num_computed_tokens`` (so a scheduler that skips
    ``allocate_slots``, calls it for a request it does not admit, or advances the requests itself
    fails), then the running and waiting lists after the engine's update.
    ``hint(expected, got, running_before, missing)`` explains a wrong dict; ``running_before`` lists the ids
    running when the step began, ``missing`` each request's missing tokens then. Last, the order of the dict's keys (the engine batches in that order),
    explained by ``order_hint``.
    """
    while not sim.done() and sim.step_no < max_steps:
        sim.arrive()
        rec.step(f"step {sim.step_no}: {describe(sim)}")
        before = sim.ids(sim.running)
        missing = {rid: r.num_tokens - r.num_computed_tokens for rid, r in sim.requests.items()}
        computed = {rid: r.num_computed_tokens for rid, r in sim.requests.items()}
        given = snapshot(contracts.SCHEDULE_STEP_MUTATES, num_computed_tokens=computed)
        scheduled = call(sim)
        observe_contract(rec, contracts.SCHEDULE_STEP, scheduled)
        rec.observe(
            "scheduled {request_id: tokens}",
            scheduled,
            hint=lambda e, g, s, before=before, missing=missing: hint(e, g, before, missing),
        )
        rec.observe(
            "KV blocks held per request after the call",
            {rid: n for rid in sim.requests if (n := len(sim.kv.get_block_ids(rid)))},
            hint=_blocks_hint,
        )
        rec.observe(
            "free KV blocks after the call",
            sim.kv.num_free_blocks,
            hint="allocate_slots once for each request you schedule, for exactly its tokens",
        )
        computed = {rid: r.num_computed_tokens for rid, r in sim.requests.items()}
        observe_read_only(rec, contracts.SCHEDULE_STEP_MUTATES, given, num_computed_tokens=computed)
        order = list(scheduled) if isinstance(scheduled, dict) else None
        sim.apply(scheduled)
        rec.state(sim.state())
        waiting_now = sim.ids(sim.waiting)
        rec.observe(
            "running after the step",
            sim.ids(sim.running),
            hint=lambda e, g, s, waiting=waiting_now: _running_hint(e, g, waiting),
        )
        rec.observe("waiting after the step", sim.ids(sim.waiting))
        rec.observe(
            "order of the scheduled requests",
            order,
            hint=order_hint,
        )


def _describe(max_num_seqs: int) -> Callable[[Sim], str]:
    return lambda s: (
        f"schedule_step(running={s.ids(s.running)}, waiting={s.ids(s.waiting)}, kv, max_num_seqs={max_num_seqs})"
    )


def _hint(expected: Any, got: Any, running_before: list[str], missing: dict[str, int]) -> str | None:
    if not isinstance(got, dict):
        return "return a dict {request_id: number of tokens}"
    if set(got) < set(expected):
        absent = sorted(set(expected) - set(got))
        return (
            f"{', '.join(absent)} should also run in this step. Continuous batching admits a waiting request as "
            "soon as there is room (fewer than max_num_seqs running, allocate_slots succeeds) - it does not "
            "wait for the whole batch to finish - and every running request gets its missing tokens"
        )
    if set(got) > set(expected):
        extra = sorted(set(got) - set(expected))
        return (
            f"{', '.join(extra)} should not run in this step: at most max_num_seqs requests run, and when "
            "allocate_slots returns None for the head of the queue, nobody behind it may join"
        )
    return (
        "a running request gets all the tokens it misses, num_tokens - num_computed_tokens (its prompt first, "
        "then what the engine appended since: usually 1 token, several when it appended several)"
    )


STEP = register(
    Exercise(
        "04.schedule_step",
        "schedule_step",
        "one step of continuous batching: running requests first, then waiting ones join while there is room",
        render=render_history,
        components=("scheduler", "schedule_step"),
    )
)


def _workload_test(
    title: str,
    arrivals: Sequence[Arrival],
    max_num_seqs: int,
    num_gpu_blocks: int = 64,
    block_size: int = 4,
    tokens_per_step: int = 1,
) -> None:
    @STEP.test(title)
    def _(fn: Any, rec: Any) -> None:
        sim = Sim(arrivals, num_gpu_blocks, block_size, tokens_per_step)
        run_workload(lambda s: fn(s.running, s.waiting, s.kv, max_num_seqs), rec, sim, _describe(max_num_seqs), _hint)


def random_arrivals(seed: int, n: int, max_prompt: int = 12, max_out: int = 6, spread: int = 10) -> list[Arrival]:
    rng = random.Random(seed)
    return [(rng.randrange(spread), f"r{i}", rng.randint(1, max_prompt), rng.randint(1, max_out)) for i in range(n)]


_workload_test(
    "three requests arriving together: prefill, then decode one token per step",
    [(0, "r0", 5, 3), (0, "r1", 3, 4), (0, "r2", 7, 2)],
    max_num_seqs=8,
)
_workload_test(
    "a request arriving mid-run joins at once (no waiting for the batch to finish)",
    [(0, "r0", 4, 6), (0, "r1", 4, 2), (2, "r2", 6, 3), (3, "r3", 2, 2)],
    max_num_seqs=8,
)
_workload_test(
    "max_num_seqs caps the batch; a finished request's place is refilled",
    [(0, "r0", 3, 2), (0, "r1", 3, 5), (0, "r2", 4, 2), (0, "r3", 2, 3), (1, "r4", 2, 1)],
    max_num_seqs=2,
)
_workload_test(
    "a request that does not fit waits at the head of the queue; nobody overtakes it",
    [(0, "r0", 8, 4), (0, "r1", 33, 3), (0, "r2", 2, 2), (1, "r3", 2, 2)],
    max_num_seqs=8,
    num_gpu_blocks=10,
    block_size=4,
)
_workload_test(
    "a random workload of 12 requests, step by step",
    random_arrivals(4, 12),
    max_num_seqs=4,
    num_gpu_blocks=64,
    block_size=4,
)
_workload_test(
    "running requests several tokens behind (3 tokens per step, as with speculative decoding): each gets all",
    [(0, "r0", 5, 9), (0, "r1", 3, 7), (1, "r2", 6, 8)],
    max_num_seqs=8,
    num_gpu_blocks=64,
    block_size=4,
    tokens_per_step=3,
)


# --- differential check (issue 39): random engine states, the learner's step against the reference ----------
from hypothesis import strategies as st  # noqa: E402 - the differential block stays at the end of the module

from pagedlab.core.kv_cache_manager import cdiv  # noqa: E402
from pagedlab.grading.differential import differential  # noqa: E402


class Digits:
    """Reads drawn bytes as one int of mixed-radix digits. Hypothesis draws random bytes uniformly, where many
    small draws cluster (it keeps mutating the later ones around a few states), and shrinks them towards 0 -
    every digit 0, the simplest state."""

    def __init__(self, drawn: bytes) -> None:
        self.n = int.from_bytes(drawn, "little")

    def take(self, base: int) -> int:
        self.n, d = divmod(self.n, base)
        return d


def _running_request(code: int, chunked: bool) -> list[int]:
    """``[prompt_len, num_output_tokens, missing]`` of a running request from one drawn int (one draw is
    cheap, and shrinking it towards 0 shrinks the request: a 1-token prompt, 1 output token, 1 missing)."""
    code, prompt = divmod(code, 24)
    code, out = divmod(code, 8)
    code, missing = divmod(code, 4)
    prompt, out, missing = prompt + 1, out + 1, missing + 1
    if chunked and code % 2:  # inside its prompt, or its re-prefill after a preemption
        out = (0, 0, 1, 3)[out % 4]
        prompt += prompt + out == 1
        return [prompt, out, 1 + (missing * 7919 + code) % (prompt + out - 1)]
    return [prompt, out, min(missing, out)]


def _waiting_request(code: int) -> list[int]:
    """``[prompt_len, num_output_tokens]`` of a waiting request from one drawn int (as :func:`_running_request`)."""
    out, prompt = divmod(code, 40)
    return [prompt + 1, (0, 0, 0, 1, 2, 5)[out]]


def decode_batch_state(drawn: bytes, chunked: bool = False) -> dict[str, Any]:
    """One engine state at the start of a step, as plain data (lab 04; ``chunked``: lab 05's budget too).

    ``running``: ``[prompt_len, num_output_tokens, missing]`` in running order - a request the engine
    served last step misses the tokens it appended (1, several with speculative decoding); with
    ``chunked`` it may still be inside its prompt (or its re-prefill after a preemption). ``waiting``:
    ``[prompt_len, num_output_tokens]`` in queue order - output tokens when it was preempted for
    recompute and waits to start over (nothing computed, no blocks). The pool has room for the running
    requests (the labs' contract) plus ``slack`` blocks, often too few for the head of the queue (``head_fit``:
    exactly its need, one block less or more; ``"all"``: room for every waiting request too).
    ``max_num_seqs`` is at least the number running; ``steps`` steps run (the engine's update between);
    ``arrival_order`` ranks the running requests' arrivals (ids and arrival times), which after
    preemptions need not be their running order.
    """
    d = Digits(drawn)
    n_run, n_wait = d.take(6), d.take(6)
    running = [_running_request(d.take(24 * 8 * 4 * 2), chunked) for _ in range(n_run)]
    waiting = [_waiting_request(d.take(40 * 6)) for _ in range(n_wait)]
    ranks = list(range(n_run))
    out: dict[str, Any] = {
        "block_size": (4, 1, 2, 16)[d.take(4)],
        "running": running,
        "waiting": waiting,
        "max_num_seqs": max(1, n_run + d.take(4)),
        "slack": d.take(13),
        # boundary: the free blocks are the head of the queue's need, one less or one more; "all": room for
        # every waiting request too; None: just the slack
        "head_fit": (None, -1, 0, 1, "all")[d.take(5)],
        "first_id": d.take(13),
        "t0": (1_000_000_000 + d.take(200_000_000_000)) / 1e6,  # perf_counter seconds of a running engine
        "tokens_per_step": (1, 2, 3)[d.take(3)],
        "steps": 1 + d.take(6),
        # running order against arrival order: a request preempted and re-admitted runs after later arrivals
        "arrival_order": [ranks.pop(d.take(len(ranks))) for _ in range(n_run)],
    }
    if chunked:
        out["max_num_batched_tokens"] = 1 + d.take(16) if d.take(2) else 1 + d.take(64)
        out["long_prefill_token_threshold"] = (0, 0, 1, 2, 4, 8, 16)[d.take(7)]
    return out


def batch_case(chunked: bool = False) -> Any:
    """1-3 engine states (:func:`decode_batch_state`), each run on its own: one draw serves several."""
    return st.lists(
        st.binary(min_size=32, max_size=32).map(lambda b: decode_batch_state(b, chunked)), min_size=1, max_size=3
    )


def _specs(case: dict[str, Any]) -> list[tuple[int, int, int, bool]]:
    return [(p, o, m, True) for p, o, m in case["running"]] + [(p, o, 0, False) for p, o in case["waiting"]]


def batch_sim(case: dict[str, Any]) -> Sim:
    """The :class:`Sim` of :func:`decode_batch_state`'s state, built as the engine leaves it (fresh every time).

    Ids are the engine's (``str`` of a counter, so ``"10"`` follows ``"9"``), given in arrival order with
    perf_counter seconds; a running request holds the blocks of its computed tokens.
    """
    bs = case["block_size"]
    held = [cdiv(p + o - m, bs) for p, o, m in case["running"]]
    grow = [cdiv(p + o, bs) - h for (p, o, _), h in zip(case["running"], held, strict=True)]
    slack = case["slack"]
    if case["head_fit"] == "all":
        slack += sum(cdiv(p + o, bs) for p, o in case["waiting"])
    elif case["head_fit"] is not None and case["waiting"]:
        head = sum(case["waiting"][0])  # its whole sequence; lab 05: the chunk it gets after the running ones
        if "max_num_batched_tokens" in case:
            left, cap = case["max_num_batched_tokens"], case["long_prefill_token_threshold"] or 1 << 30
            for _, _, m in case["running"]:
                left -= max(0, min(m, cap, left))
            head = max(1, min(head, cap, left))
        slack = max(0, cdiv(head, bs) + case["head_fit"])
    sim = Sim([], sum(held) + sum(grow) + slack or 1, bs, case["tokens_per_step"])
    sim.pending = []
    order = list(case["arrival_order"]) + list(range(len(case["running"]), len(specs := _specs(case))))
    for k, (p, o, m, runs) in enumerate(specs):
        number = case["first_id"] + order[k]
        rid = str(number)
        t = case["t0"] + 0.0137 * order[k]
        req = Request(
            rid,
            [(7 * i + number) % 97 for i in range(p)],
            SamplingParams(max_tokens=o + 6, ignore_eos=True),
            arrival_time=t,
        )
        if o:
            req.append_output_token_ids([1 + i % 50 for i in range(o)])
        sim.requests[rid] = req
        if runs:
            computed = p + o - m
            sim.kv.allocate_slots(req, computed)
            req.num_computed_tokens = computed
            sim.running.append(req)
        else:
            sim.waiting.append(req)
    return sim


def describe_batch(case: list[dict[str, Any]]) -> str:
    """The engines of :func:`batch_case` as the learner reads them."""
    return "; then ".join(f"engine {k}: {_describe_state(state)}" for k, state in enumerate(case, 1))


def _describe_state(case: dict[str, Any]) -> str:
    sim = batch_sim(case)
    run = [
        f"{r.request_id} ({r.num_prompt_tokens}+{r.num_output_tokens} tokens, misses "
        f"{r.num_tokens - r.num_computed_tokens})"
        for r in sim.running
    ]
    wait = [
        f"{r.request_id} ({r.num_prompt_tokens}"
        + (f"+{r.num_output_tokens}, preempted earlier" if r.num_output_tokens else "")
        + " tokens)"
        for r in sim.waiting
    ]
    extra = ""
    if "max_num_batched_tokens" in case:
        extra = (
            f", max_num_batched_tokens={case['max_num_batched_tokens']}, "
            f"long_prefill_token_threshold={case['long_prefill_token_threshold']}"
        )
    return (
        f"running=[{', '.join(run)}], waiting=[{', '.join(wait)}], {sim.kv.num_free_blocks} free blocks of "
        f"{case['block_size']} tokens, max_num_seqs={case['max_num_seqs']}{extra}; {case['steps']} step(s), "
        f"{case['tokens_per_step']} token(s) appended per served request"
    )


def _fits_only_if_admitted_first(sim: Sim, budget: int | None, threshold: int) -> set[str]:
    """The waiting requests that fit the pool as the step finds it (in queue order, each after the ones before
    it), but not once the running requests have their chunks' slots: admitted only by admitting first."""
    left = budget

    def chunk(req: Request) -> int:
        n = req.num_tokens - req.num_computed_tokens
        if threshold > 0:
            n = min(n, threshold)
        return n if left is None else max(0, min(n, left))

    need_running = 0
    for r in sim.running:
        n = chunk(r)
        need_running += cdiv(r.num_computed_tokens + n, sim.block_size) - len(sim.kv.get_block_ids(r.request_id))
        left = None if left is None else left - n
    free = sim.kv.num_free_blocks
    out: set[str] = set()
    cum = 0
    for r in sim.waiting:
        n = chunk(r)
        if n <= 0:
            break
        cum += cdiv(n, sim.block_size)
        left = None if left is None else left - n
        if cum <= free < cum + need_running:
            out.add(r.request_id)
    return out


def batch_hint(
    sim: Sim,
    fallback: Callable[[Any, Any, list[str], dict[str, int]], str | None],
    budget: int | None = None,
    threshold: int = 0,
) -> Callable[[Any, Any, list[str], dict[str, int]], str | None]:
    """The dict's hint on a random state: the mistakes only such states show, else ``fallback``'s.

    Built when the step begins (the sim as the call finds it): it reads what the hints need then.
    ``budget``, ``threshold``: lab 05's token budget and chunk cap (None: lab 04, no budget).
    """
    prompts = {r.request_id: r.num_prompt_tokens for r in sim.requests.values()}
    resumed = {r.request_id for r in sim.waiting if r.num_output_tokens}
    fits_only_first = _fits_only_if_admitted_first(sim, budget, threshold)

    def hint(expected: Any, got: Any, running_before: list[str], missing: dict[str, int]) -> str | None:
        if isinstance(expected, dict) and isinstance(got, dict):
            for rid in sorted(set(got) & resumed):
                if got[rid] != expected.get(rid) and got[rid] == prompts[rid] != expected.get(rid):
                    return (
                        f"{rid} was preempted earlier and waits with its generated tokens: it misses "
                        f"{missing.get(rid)} tokens (num_tokens - num_computed_tokens: prompt + generated), not "
                        f"just its {prompts[rid]}-token prompt"
                    )
            late = [r for r in got if r in fits_only_first and r not in expected]
            if late:
                return (
                    f"{late[0]} did not fit once the running requests had their slots: reserve every running "
                    "request's slots (allocate_slots) before admitting anyone - the running requests come first, "
                    "newcomers get what is left"
                )
        return fallback(expected, got, running_before, missing)

    return hint


def run_batch_case(
    call: Callable[[Sim], Any],
    rec: Any,
    sim: Sim,
    steps: int,
    describe: Callable[[Sim], str],
    fallback: Callable[[Any, Any, list[str], dict[str, int]], str | None],
    budget: int | None = None,
    threshold: int = 0,
    **kw: Any,
) -> None:
    """``steps`` steps of :func:`run_workload` from a random state, each with :func:`batch_hint` of its own state."""
    for _ in range(steps):
        if sim.done():
            break
        hint = batch_hint(sim, fallback, budget, threshold)
        run_workload(call, rec, sim, describe, hint, max_steps=sim.step_no + 1, **kw)


@differential(
    STEP,
    batch_case(),
    examples=60,
    describe=describe_batch,
    draws="1-3 engines mid-run, each: 0-5 running requests (1-4 tokens behind, in an order other than their "
    "arrival) and 0-5 waiting ones (fresh or preempted earlier, with output tokens), block size 1-16, a pool "
    "with room for the running requests plus 0-12 blocks (the head's need exactly, one less, one more, or room "
    "for all), max_num_seqs = running + 0-3, engine ids and perf_counter arrival times; 1-6 steps with the "
    "engine's update",
)
def _(fn: Any, case: Any, rec: Any) -> None:
    for state in case:
        m: int = state["max_num_seqs"]

        def call(s: Sim, m: int = m) -> Any:
            return fn(s.running, s.waiting, s.kv, m)

        run_batch_case(call, rec, batch_sim(state), state["steps"], _describe(m), _hint)
