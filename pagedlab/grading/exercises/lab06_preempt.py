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
from pagedlab.grading.contract import observe_contract
from pagedlab.grading.exercises.lab04 import Arrival, Sim, history_steps
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.request import Request


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
    from pagedlab.viz import render_batch_gantt

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


def _scheduled_hint(expected: Any, got: Any, before: list[str], max_num_seqs: int) -> str | None:
    if not isinstance(got, dict):
        return "return a pair ({request_id: tokens}, [preempted ids])"
    extra = sorted(set(got) - set(expected))
    missing = sorted(set(expected) - set(got))
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


def _preempted_hint(policy: str) -> Any:
    def hint(expected: Any, got: Any, state: Any) -> str:
        if not isinstance(got, list):
            return "return the ids preempted in this step as a list, in the order you preempted them"
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


def _running_swapped_hint(got: Any, victims: set[str]) -> str:
    """Explains wrong running / swapped lists; names a victim still in the caller's ``running``."""
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
    rec.observe("preempted in this step", preempted, hint=_preempted_hint(policy))
    rec.observe("swapped back in during this preempting step", came_back, hint=_swapped_back_hint)
    rec.observe(
        "scheduled {request_id: tokens}",
        scheduled,
        hint=lambda e, g, s, before=before: _scheduled_hint(e, g, before, max_num_seqs),
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
    rec.observe(
        "running, swapped after the call",
        [sim.ids(sim.running), sim.ids(sim.swapped)],
        hint=lambda e, g, s, victims=victims: _running_swapped_hint(g, victims),
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
