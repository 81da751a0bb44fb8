"""Lab 06 - the preempt-and-retry loop of a scheduling step (vLLM v1 ``Scheduler.schedule``, 0.9 - 0.11;
swap preemption as vLLM v0.6).

* ``06.schedule_with_preemption`` - ``schedule_with_preemption(running, waiting, swapped, kv_cache_manager,
  max_num_seqs, policy, preemption_mode) -> (scheduled, preempted)``: when ``allocate_slots`` fails,
  preempt the victim (fcfs: the end of ``running``; priority: the largest ``(priority, arrival_time)``),
  swap it out or free it for recompute (``num_computed_tokens = 0``, front of ``waiting``), retry, stop if
  the request preempted itself; a step that preempted brings back and admits nobody.

The harness (:class:`PreemptSim`, lab 04's engine loop plus a CPU swap pool) advances, samples and frees
requests after each call, as the library does. The reference agrees step by step with
``pagedlab.sched.scheduler.Scheduler`` (fcfs and priority, recompute and swap; checked in ``tests/grading``).
One simplification: ``waiting`` is a deque under both policies, where the library (as vLLM) keeps a heap
ordered by ``(priority, arrival_time)`` under ``"priority"``; on this module's priority workloads both give
the same schedule at every step (the alignment test checks it).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from typing import Any

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.course.exercises.lab04 import Arrival, Sim, history_steps
from pagedlab.grading.contract import observe_contract
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.request import Request
from pagedlab.viz import render_batch_gantt


class PreemptSim(Sim):
    """Lab 04's engine loop with a CPU swap pool, a ``swapped`` queue and per-request priorities.

    Args:
        arrivals: ``(step, request_id, prompt_len, max_tokens)``.
        num_gpu_blocks, block_size: the KV pool.
        num_cpu_blocks: the swap pool (0: swap always falls back to recompute).
        priorities: request id -> priority (default 0).
    """

    def __init__(
        self,
        arrivals: Sequence[Arrival],
        num_gpu_blocks: int,
        block_size: int = 4,
        num_cpu_blocks: int = 0,
        priorities: dict[str, int] | None = None,
    ) -> None:
        super().__init__(arrivals, num_gpu_blocks, block_size)
        self.kv = KVCacheManager(block_size, num_gpu_blocks, max_model_len=4096, num_cpu_blocks=num_cpu_blocks)
        self.swapped: deque[Request] = deque()
        self.priorities = dict(priorities or {})

    def arrive(self) -> None:
        super().arrive()
        for rid, req in self.requests.items():
            req.priority = self.priorities.get(rid, 0)

    def done(self) -> bool:
        return super().done() and not self.swapped

    def state(self) -> dict[str, Any]:
        out = super().state()
        out["swapped"] = self.ids(self.swapped)
        return out


def _render(state: dict[str, Any], expected: Any, path: Any) -> str:

    title = f"then: running {state['running']}, waiting {state['waiting']}, swapped {state['swapped']}"
    return render_batch_gantt(history_steps(state["history"]), title=title)


PREEMPT = register(
    Exercise(
        "06.schedule_with_preemption",
        "schedule_with_preemption",
        "preempt and retry when the KV cache is full; a step that preempted admits nobody new",
        render=_render,
        components=("preemption", "schedule_with_preemption", "scheduler"),
    )
)


def _scheduled_hint(
    expected: Any,
    got: Any,
    before: list[str],
    max_num_seqs: int,
    swapped_before: Sequence[str] = (),
    stopped: Sequence[str] = (),
    self_victim: str = "",
) -> str | None:
    """``stopped``: the running requests the reference left unscheduled after ``self_victim``, which preempted
    itself (the running pass stops there)."""
    if not isinstance(got, dict):
        return "return a pair ({request_id: tokens}, [preempted ids])"
    extra = sorted(set(got) - set(expected))
    missing = sorted(set(expected) - set(got))
    if extra and set(extra) <= set(stopped):
        return _self_victim_text(self_victim, stopped)
    behind = [r for r in extra if r in swapped_before[1:] and swapped_before[0] not in got]
    if behind and isinstance(expected, dict) and len(expected) < max_num_seqs:
        return (
            f"{', '.join(behind)} came back ahead of {swapped_before[0]}, the head of `swapped`: swapped requests come "
            "back in order - when the head cannot come back (can_swap_in is False), nobody behind it may"
        )
    if extra and len(expected) >= max_num_seqs and any(r not in before for r in extra):
        return (
            f"{', '.join(r for r in extra if r not in before)} joined a full batch: at most max_num_seqs "
            f"({max_num_seqs}) requests run - admit (or swap in) only while fewer than that are running"
        )
    if extra and any(r not in before for r in extra):
        return (
            f"{', '.join(r for r in extra if r not in before)} joined in a step that preempted (or while a "
            "request is swapped out): a step that preempted admits nobody new - the freed blocks go to the "
            "running requests first"
        )
    later = [r for r in extra if any(before.index(x) > before.index(r) for x in expected if x in before)]
    if later:
        return (
            f"{', '.join(later)} was scheduled earlier in this step, then preempted: it must not be scheduled - "
            "drop it from the step's schedule when you preempt it"
        )
    if extra:
        return (
            f"{', '.join(extra)} was preempted in this step: when the victim is the request you are allocating "
            "for, stop - schedule neither it nor any running request after it in this step"
        )
    gone = [x for x in before if x not in expected and x not in got]
    skipped = [r for r in missing if r in before and any(before.index(x) < before.index(r) for x in gone)]
    if skipped:
        return (
            f"{', '.join(skipped)} was skipped: the victim sat earlier in `running` than the request you were "
            "allocating for, so removing it moved every later request one place forward - after a preemption, "
            "find where the current request is now before going on to the next one"
        )
    if missing:
        return (
            f"{', '.join(missing)} should run in this step: retry allocate_slots after each preemption until it "
            "succeeds, then go on with the next running request"
        )
    return "a scheduled request gets num_tokens - num_computed_tokens tokens"


def _swapped_back_hint(expected: Any, got: Any, state: Any) -> str:
    back = ", ".join(str(r) for r in got) if isinstance(got, list) else str(got)
    return (
        f"{back} was swapped back in during a step that preempted: swapped requests come back (step 2) only in "
        "a step that preempted nobody - a victim just swapped out waits in `swapped` for the next step"
    )


def _self_victim_text(victim: str, stopped: Sequence[str]) -> str:
    return (
        f"{victim} preempted itself (it was the victim when it could not grow): stop the running pass there - "
        f"{', '.join(stopped)}, after it in `running`, are neither scheduled nor preempted in this step"
    )


def _preempted_hint(policy: str, stopped: Sequence[str] = ()) -> Any:
    """``stopped``: the running requests the reference left unscheduled after its last victim, which preempted
    itself (the pass stops there)."""

    def hint(expected: Any, got: Any, state: Any) -> str:
        if not isinstance(got, list):
            return "return the ids preempted in this step as a list, in the order you preempted them"
        if stopped and isinstance(expected, list) and len(got) > len(expected) and got[: len(expected)] == expected:
            return _self_victim_text(expected[-1], stopped)
        if isinstance(expected, list) and 0 < len(got) < len(expected) and got == expected[-len(got) :]:
            return (
                "only the last victim is listed: when several requests are preempted in one step, return every "
                "one of them, in the order you preempted them"
            )
        if isinstance(expected, list) and 0 < len(got) < len(expected) and got == expected[: len(got)]:
            return (
                f"you stopped preempting after {', '.join(map(str, got))}: while allocate_slots still fails, "
                "preempt the next victim and retry - a step may preempt several requests"
            )
        if isinstance(expected, list) and len(got) > len(expected) and got[: len(expected)] == expected:
            return (
                "you preempted more requests than needed: a request preempted in this step left `running` and "
                "must not be visited again - walk the live `running` list (an index), not a copy of it"
            )
        if policy == "priority":
            return (
                "priority: preempt the running request with the largest (priority, arrival_time) - a larger "
                "value is less important - even one already scheduled in this step"
            )
        return (
            "fcfs: preempt the END of the running list (the request admitted last), one at a time, and retry "
            "allocate_slots after each"
        )

    return hint


def _blocks_hint(expected: Any, got: Any, state: Any) -> str:
    """Explains the [GPU blocks, CPU blocks] per request: a request short of GPU blocks was never retried."""
    if isinstance(expected, list) and isinstance(got, list) and len(got) == 2 and isinstance(got[0], dict):
        short = [r for r, n in expected[0].items() if type(got[0].get(r, 0)) is int and got[0].get(r, 0) < n]
        if short:
            return (
                f"{short[0]} holds fewer GPU blocks than the tokens scheduled for it need: after each preemption, "
                "call allocate_slots again for the same request - retry until it succeeds (or it was the victim)"
            )
    return (
        "recompute: kv_cache_manager.free(victim); swap: kv_cache_manager.swap_out([victim]); and "
        "allocate_slots only for requests you schedule"
    )


def _computed_hint(expected: Any, got: Any, state: Any) -> str:
    return (
        "a request preempted for recompute loses its KV: set its num_computed_tokens to 0 (its generated "
        "tokens stay; they are recomputed as part of its prompt); a swapped-out request keeps its count, and "
        "the engine advances the scheduled ones after the step"
    )


def _waiting_hint(expected: Any, got: Any, victims: set[str]) -> str:
    k = len(victims)
    if k >= 2 and isinstance(got, list) and set(got[:k]) == victims and got[:k] != expected[:k]:
        return (
            "several victims in one step: put each at the FRONT of waiting as you preempt it "
            "(appendleft, one victim at a time), so the last one preempted - under fcfs the older request - is admitted "
            "first again"
        )
    return (
        "a request preempted for recompute goes back to the FRONT of waiting (waiting.appendleft), so it is the "
        "first to be admitted again"
    )


def _running_swapped_hint(got: Any, victims: set[str], lost: Sequence[str] = ()) -> str:
    """Explains wrong running / swapped lists; names a victim still in the caller's ``running``, or a request
    swapped in that is in neither list (``lost``: those the reference put back in ``running``)."""
    gone = [r for r in lost if isinstance(got, list) and len(got) == 2 and all(r not in part for part in got)]
    if gone:
        return (
            f"{', '.join(gone)} came back from `swapped` but is in neither `running` nor `swapped`: a request you "
            "swap in joins `running` even when allocate_slots then fails for it (it runs in a later step)"
        )
    still = sorted(r for r in victims if isinstance(got, list) and got and isinstance(got[0], list) and r in got[0])
    if still:
        return (
            f"{', '.join(still)} was preempted but is still in the `running` list you were given: remove it from "
            "that very list (running.remove(victim)) - binding a new list to the name `running` inside your "
            "function is lost when it returns, the engine keeps its own list"
        )
    return "the victim leaves running; swapped (swap mode, the CPU pool has room) or waiting (recompute)"


def _step(fn: Any, rec: Any, sim: PreemptSim, max_num_seqs: int, policy: str, mode: str) -> None:
    """One recorded step: the call, everything it changed, then the engine's update."""
    rec.step(
        f"step {sim.step_no}: running={sim.ids(sim.running)}, waiting={sim.ids(sim.waiting)}, "
        f"swapped={sim.ids(sim.swapped)}, {sim.kv.num_free_blocks} free blocks  (policy={policy!r}, "
        f"preemption_mode={mode!r}, max_num_seqs={max_num_seqs})"
    )
    before = sim.ids(sim.running)
    swapped_before = sim.ids(sim.swapped)
    out = fn(sim.running, sim.waiting, sim.swapped, sim.kv, max_num_seqs, policy, mode)
    observe_contract(rec, contracts.SCHEDULE_WITH_PREEMPTION, out)
    # running again after being in the CPU pool (swapped before the call, or swapped out by it and
    # back), in a step that preempted: always none for the reference, which swaps in only when it did not
    victims = set(out[1]) if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], list) else set()
    was_swapped = set(swapped_before) | (victims if mode == "swap" else set())
    came_back = [r for r in sim.ids(sim.running) if r in was_swapped] if victims else []
    try:
        scheduled, preempted = out
    except (TypeError, ValueError):
        rec.fail(
            f"schedule_with_preemption must return a pair (scheduled, preempted); it returned {type(out).__name__}"
        )
    # the reference's pass stopped at a victim that preempted itself: running requests after it left unscheduled
    sched = scheduled if isinstance(scheduled, dict) else {}
    pre = preempted if isinstance(preempted, list) else []
    last = max((before.index(p) for p in pre if p in before), default=len(before))
    stopped = [r for r in before[last + 1 :] if r not in sched and r not in pre] if pre and pre[-1] in before else []
    rec.observe("preempted in this step", preempted, hint=_preempted_hint(policy, stopped))
    rec.observe("swapped back in during this preempting step", came_back, hint=_swapped_back_hint)
    rec.observe(
        "scheduled {request_id: tokens}",
        scheduled,
        hint=lambda e, g, s, before=before: _scheduled_hint(
            e, g, before, max_num_seqs, swapped_before, stopped, pre[-1] if stopped else ""
        ),
    )
    rec.observe(
        "num_computed_tokens after the call",
        {rid: r.num_computed_tokens for rid, r in sim.requests.items()},
        hint=_computed_hint,
    )
    rec.observe(
        "waiting after the call",
        sim.ids(sim.waiting),
        hint=lambda e, g, s, victims=victims: _waiting_hint(e, g, victims),
    )
    back = [r for r in swapped_before if r in sim.ids(sim.running)]  # swapped in by this call
    rec.observe(
        "running, swapped after the call",
        [sim.ids(sim.running), sim.ids(sim.swapped)],
        hint=lambda e, g, s, victims=victims, lost=back: _running_swapped_hint(g, victims, lost),
    )
    rec.observe(
        "GPU blocks, CPU blocks held per request after the call",
        [
            {rid: len(t) for rid, t in sim.kv.req_to_blocks.items() if t},
            {rid: len(t) for rid, t in sim.kv.req_to_cpu_blocks.items() if t},
        ],
        hint=_blocks_hint,
    )
    sim.apply(scheduled if isinstance(scheduled, dict) else {})
    applied = {e[0] for e in sim.history[-1]["scheduled"]}
    sim.history[-1]["scheduled"] += [
        [rid, n, False]
        for rid, n in (scheduled.items() if isinstance(scheduled, dict) else ())
        if rid not in applied and type(n) is int
    ]
    sim.history[-1]["preempted"] = [p for p in preempted if isinstance(p, str)] if isinstance(preempted, list) else []
    rec.state(sim.state())


def run(
    fn: Any,
    rec: Any,
    sim: PreemptSim,
    max_num_seqs: int = 8,
    policy: str = "fcfs",
    mode: str = "recompute",
    max_steps: int = 80,
) -> None:
    """Step ``sim`` until every request finished (at most ``max_steps`` steps)."""
    while not sim.done() and sim.step_no < max_steps:
        sim.arrive()
        _step(fn, rec, sim, max_num_seqs, policy, mode)


def _test(
    title: str,
    arrivals: Sequence[Arrival],
    num_gpu_blocks: int,
    *,
    max_num_seqs: int = 8,
    policy: str = "fcfs",
    mode: str = "recompute",
    num_cpu_blocks: int = 0,
    priorities: dict[str, int] | None = None,
) -> None:
    @PREEMPT.test(title)
    def _(fn: Any, rec: Any) -> None:
        sim = PreemptSim(arrivals, num_gpu_blocks, 4, num_cpu_blocks, priorities)
        run(fn, rec, sim, max_num_seqs, policy, mode)


def random_arrivals(seed: int, n: int) -> list[Arrival]:
    """``n`` requests over 6 steps, prompts of 1-10 tokens, 2-9 outputs (enough to fill a small pool)."""
    rng = random.Random(seed)
    return [(rng.randrange(6), f"r{i}", rng.randint(1, 10), rng.randint(2, 9)) for i in range(n)]


# Workloads: block_size 4; three requests of 6 prompt + 8 output tokens need 4 blocks each at the end.
THREE = [(0, "r0", 6, 8), (0, "r1", 6, 8), (0, "r2", 6, 8)]

_test(
    "fcfs, recompute: the newest running request is preempted, re-queued at the front and starts over",
    [(0, "r0", 4, 8), (0, "r1", 5, 8), (0, "r2", 6, 8)],
    5,
)
_test(
    "a preempted request waits at the head of the queue: a newer request does not overtake it",
    THREE + [(3, "r3", 1, 2)],
    8,
)
_test(
    "a request that cannot grow may be the victim itself: it stops the running pass",
    [(0, "r0", 7, 6), (0, "r1", 7, 6)],
    4,
)
_test(
    "priority: the least important request goes first, even one scheduled earlier in the step",
    THREE,
    8,
    policy="priority",
    priorities={"r0": 2, "r1": 0, "r2": 1},
)
_test(
    "swap: the victim moves to the CPU pool and comes back before any waiting request",
    THREE + [(2, "r3", 2, 3), (4, "r4", 2, 3)],
    8,
    mode="swap",
    num_cpu_blocks=16,
)
_test("swap with a full CPU pool falls back to recompute", THREE, 8, mode="swap", num_cpu_blocks=1)
_test("a random workload of 8 requests, fcfs", random_arrivals(3, 8), 9)
_test(
    "random workload, priority and swap",
    random_arrivals(5, 8),
    9,
    policy="priority",
    mode="swap",
    num_cpu_blocks=6,
    priorities={f"r{i}": (i * 5) % 3 for i in range(8)},
)
_test(
    "more requests than max_num_seqs: the rest wait, and join as places free up",
    [(0, f"r{i}", 3, 3) for i in range(5)] + [(2, "r5", 2, 2)],
    32,
    max_num_seqs=2,
)
_test(
    "two requests cannot grow in one step: two victims, both listed and re-queued at the front",
    [(0, f"r{i}", 4, 3) for i in range(4)],
    4,
)
_test(
    "priority: a victim earlier in running than the request allocating; the requests after it still run",
    [(0, "r0", 3, 2), (0, "r1", 3, 2), (0, "r2", 4, 2), (0, "r3", 3, 2)],
    4,
    policy="priority",
    priorities={"r0": 0, "r1": 2, "r2": 0, "r3": 0},
)


# --- differential check (issue 39): random engine states, the learner's step against the reference ----------
import itertools  # noqa: E402

from hypothesis import strategies as st  # noqa: E402 - the differential block stays at the end of the module

from pagedlab.core.kv_cache_manager import cdiv  # noqa: E402
from pagedlab.grading.differential import differential  # noqa: E402
from pagedlab.sampling_params import SamplingParams  # noqa: E402


def _running_spec(code: int) -> list[int]:
    """``[prompt_len, num_output_tokens, missing, priority]`` from one drawn int (shrinks towards a 1-token
    prompt, 1 output token, 1 missing, priority 0)."""
    code, prompt = divmod(code, 12)
    code, out = divmod(code, 6)
    code, missing = divmod(code, 3)
    return [prompt + 1, out + 1, min(missing + 1, out + 1), (0, 1, 2, -1, 3)[code % 5]]


def _waiting_spec(code: int) -> list[int]:
    """``[prompt_len, num_output_tokens, priority]`` (output tokens: preempted earlier, to start over)."""
    code, prompt = divmod(code, 12)
    code, out = divmod(code, 4)
    return [prompt + 1, (0, 0, 2, 5)[out], (0, 1, 2, -1, 3)[code % 5]]


#: the knobs of a state, one draw for all (hypothesis then varies them together; shrinking goes to the first):
#: mode, policy, block size, GPU blocks beyond what runs, CPU blocks beyond what is swapped, max_num_seqs
#: beyond the running ones, lockstep, how far apart the requests arrived (microseconds)
_KNOBS = list(
    itertools.product(
        ["recompute", "swap"],
        ["fcfs", "priority"],
        [2, 1, 4],
        [0, 0, 1, 2, 8, 24, "swap head fits", "swap head misses one"],
        [0, 2, 8],
        [0, 1, 2],
        [False, True],
        [1_000, 1_000_000, 3_600_000_000, 36_000_000_000],
    )
)


class _Digits:
    """Reads drawn bytes as one int of mixed-radix digits: hypothesis draws random bytes uniformly, where many
    small draws cluster (it keeps mutating the later ones around a few states), and shrinks them towards 0 -
    every digit 0, the simplest state."""

    def __init__(self, n: int) -> None:
        self.n = n

    def take(self, base: int) -> int:
        self.n, d = divmod(self.n, base)
        return d


def _decode_preempt_state(drawn: bytes) -> dict[str, Any]:
    d = _Digits(int.from_bytes(drawn, "little"))
    mode, policy, bs, slack, cpu_slack, extra, lockstep, spread = _KNOBS[d.take(len(_KNOBS))]
    n_run, n_wait = (3, 4, 2, 5, 1, 0)[d.take(6)], d.take(5)
    n_swap = d.take(4) if mode == "swap" else 0
    running = [_running_spec(d.take(12 * 6 * 3 * 5)) for _ in range(n_run)]
    swapped = [_running_spec(d.take(12 * 6 * 3 * 5)) for _ in range(n_swap)]
    waiting = [_waiting_spec(d.take(12 * 4 * 5)) for _ in range(n_wait)]
    ranks = list(range(n_run + n_swap + n_wait))
    order = [ranks.pop(d.take(len(ranks))) for _ in range(len(ranks))]
    return {
        "policy": policy,
        "mode": mode,
        "block_size": bs,
        "running": running,
        "swapped": swapped,
        "waiting": waiting,
        "slack": slack,
        "lockstep": lockstep,
        "cpu_slack": cpu_slack,
        "max_num_seqs": max(1, n_run + extra),
        "arrival_order": order,
        "spread_us": spread,
        "t0_us": 1_000_000_000 + d.take(200_000_000_000),
        "steps": 1 + d.take(4),
    }


#: 1-4 engine states at the start of a step of lab 06's scheduler, each run on its own
#: (:func:`_decode_preempt_state`).
#:
#: ``running`` ``[prompt_len, num_output_tokens, missing, priority]`` in running order, each holding the blocks
#: of its computed tokens; ``swapped`` the same, their blocks in the CPU pool (swap mode only); ``waiting``
#: ``[prompt_len, num_output_tokens, priority]``. The GPU pool has ``slack`` blocks beyond what the running
#: requests hold, often too few for them to grow (preemptions, several in a step when they run in
#: ``lockstep``); the CPU pool ``cpu_slack`` beyond what the swapped ones hold (0: a swap falls back to
#: recompute). ``arrival_order`` ranks every request's arrival (engine ids and perf_counter seconds,
#: ``spread_us`` apart at most), so the running order is not the arrival order and under ``"priority"`` the
#: victim may sit anywhere.
_PREEMPT_CASE = st.lists(st.binary(min_size=32, max_size=32).map(_decode_preempt_state), min_size=1, max_size=4)


def _preempt_sim(case: dict[str, Any]) -> PreemptSim:
    """The :class:`PreemptSim` of :func:`_preempt_case`'s state, built as the engine leaves it (fresh per case)."""
    bs = case["block_size"]
    running = case["running"]
    if case["lockstep"]:  # short requests admitted together: computed tokens fill 1 or 2 blocks exactly
        running = []
        for p, o, m, pr in case["running"]:
            computed = bs * (1 + p % 2)
            o = max(1, min(o, computed + m - 1))
            m = min(m, o)
            running.append([computed + m - o, o, m, pr])
    specs = (
        [("running", p, o, m, pr) for p, o, m, pr in running]
        + [("swapped", p, o, m, pr) for p, o, m, pr in case["swapped"]]
        + [("waiting", p, o, p + o, pr) for p, o, pr in case["waiting"]]
    )
    ids = [str(rank) for rank in case["arrival_order"]]
    held_run = sum(cdiv(p + o - m, bs) for _, p, o, m, _ in specs[: len(running)])
    held_swap = [cdiv(p + o - m, bs) for kind, p, o, m, _ in specs if kind == "swapped"]
    slack = case["slack"]
    if isinstance(slack, str):  # the free blocks, once the running requests grew, are what the head of
        # swapped needs to come back (its blocks and one more token's), or one less
        grow = sum(cdiv(p + o, bs) - cdiv(p + o - m, bs) for p, o, m, _ in running)
        head = next(([p, o, m] for kind, p, o, m, _ in specs if kind == "swapped"), None)
        need = max(cdiv(head[0] + head[1] - head[2], bs), cdiv(head[0] + head[1] - head[2] + 1, bs)) if head else 1
        slack = max(0, grow + need - (slack == "swap head misses one"))
    gpu = max(held_run + slack, max(held_swap, default=0), 1)
    sim = PreemptSim(
        [], gpu, bs, sum(held_swap) + case["cpu_slack"], {rid: s[4] for rid, s in zip(ids, specs, strict=True)}
    )
    n = max(1, len(ids))
    # the swapped requests first: each takes its blocks, then moves them to the CPU pool
    order = sorted(zip(ids, specs, strict=True), key=lambda item: item[1][0] != "swapped")
    for rid, (kind, p, o, m, prio) in order:
        req = Request(
            rid,
            [(7 * i + len(rid)) % 97 for i in range(p)],
            SamplingParams(max_tokens=o + 4, ignore_eos=True),
            arrival_time=(case["t0_us"] + int(rid) * case["spread_us"] // n) / 1e6,
            priority=prio,
        )
        if o:
            req.append_output_token_ids([1 + i % 50 for i in range(o)])
        sim.requests[rid] = req
        if kind == "waiting":
            sim.waiting.append(req)
            continue
        computed = p + o - m
        sim.kv.allocate_slots(req, computed)
        req.num_computed_tokens = computed
        if kind == "swapped":
            sim.kv.swap_out([req])
            sim.swapped.append(req)
        else:
            sim.running.append(req)
    return sim


def _describe_preempt_case(case: list[dict[str, Any]]) -> str:
    return "; then ".join(f"engine {k}: {_describe_preempt_state(state)}" for k, state in enumerate(case, 1))


def _describe_preempt_state(case: dict[str, Any]) -> str:
    sim = _preempt_sim(case)

    def show(reqs: Any, queue: bool = False) -> str:
        return ", ".join(
            f"{r.request_id} ({r.num_prompt_tokens}+{r.num_output_tokens} tokens"
            + ("" if queue else f", misses {r.num_tokens - r.num_computed_tokens}")
            + f", priority {r.priority}, arrival {r.arrival_time:.6f})"
            for r in reqs
        )

    return (
        f"running=[{show(sim.running)}], waiting=[{show(sim.waiting, True)}], swapped=[{show(sim.swapped)}]; "
        f"{sim.kv.num_free_blocks} free GPU blocks of {case['block_size']} tokens, "
        f"{sim.kv.cpu_block_pool.get_num_free_blocks() if sim.kv.cpu_block_pool else 0} free CPU blocks; "
        f"policy={case['policy']!r}, preemption_mode={case['mode']!r}, max_num_seqs={case['max_num_seqs']}; "
        f"{case['steps']} step(s)"
    )


@differential(
    PREEMPT,
    _PREEMPT_CASE,
    examples=100,
    describe=_describe_preempt_case,
    draws="1-4 engines mid-run, each: 0-5 running requests (1-3 tokens behind, half the time in lockstep: 1-2 full "
    "blocks each, all growing at once), priorities -1..3, in an order other than their arrival; 0-4 waiting (fresh "
    "or preempted earlier, with output tokens); in swap mode 0-3 swapped out; a GPU pool 0-24 blocks beyond what "
    "runs, or exactly what the head of swapped needs to come back (or one less); a CPU pool 0-8 blocks to spare; "
    "fcfs or priority, recompute or swap, block size 1-4, max_num_seqs = running + 0-2; engine ids, perf_counter "
    "arrivals a millisecond to 10 hours apart; 1-4 steps with the engine's update",
)
def _(fn: Any, case: Any, rec: Any) -> None:
    for state in case:
        sim = _preempt_sim(state)
        for _ in range(state["steps"]):
            if sim.done():
                break
            _step(fn, rec, sim, state["max_num_seqs"], state["policy"], state["mode"])
