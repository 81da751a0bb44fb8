"""Lab 05 - chunked prefill under a token budget:
``schedule_with_budget(running, waiting, kv_cache_manager, max_num_seqs, max_num_batched_tokens,
long_prefill_token_threshold)``, on the harness of lab 04. The reference agrees with the library's
``Scheduler`` (``_clip``: ``min(gap, long_prefill_token_threshold, budget)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pagedlab.course.exercises.lab04 import Arrival, Sim, random_arrivals, render_history, run_workload
from pagedlab.grading.registry import Exercise, register

BUDGET = register(
    Exercise(
        "05.schedule_with_budget",
        "schedule_with_budget",
        "chunked prefill: each request gets min(missing, long_prefill_token_threshold, budget left) tokens",
        render=render_history,
        components=("chunked_prefill", "budget", "scheduler"),
    )
)


def _describe(m: int, b: int, t: int) -> Callable[[Sim], str]:
    return lambda s: (
        f"schedule_with_budget(running={s.ids(s.running)}, waiting={s.ids(s.waiting)}, kv, "
        f"max_num_seqs={m}, max_num_batched_tokens={b}, long_prefill_token_threshold={t})"
    )


def _hint_for(budget: int, threshold: int) -> Callable[[Any, Any, list[str], dict[str, int]], str | None]:
    def hint(expected: Any, got: Any, running_before: list[str], missing: dict[str, int]) -> str | None:
        if not isinstance(got, dict):
            return "return a dict {request_id: number of tokens}"
        vals = [v for v in got.values() if type(v) is int]
        if sum(vals) > budget:
            return f"the step schedules {sum(vals)} tokens, more than max_num_batched_tokens={budget}"
        if threshold > 0 and any(v > threshold for v in vals):
            return f"a chunk may not exceed long_prefill_token_threshold={threshold} tokens"
        starved = [rid for rid in running_before if rid in expected and rid not in got]
        if starved:
            return (
                f"{', '.join(starved)} {'was' if len(starved) == 1 else 'were'} already running and got nothing: "
                "schedule the running requests (their decodes) first, then let waiting prefills use what is "
                "left of the budget - prefills first would starve the decodes"
            )
        extra = sorted(set(got) - set(expected))
        if extra:
            return (
                f"{', '.join(extra)} should not run in this step: at most max_num_seqs requests run, and when "
                "allocate_slots returns None for the head of the queue the pool is full - stop, nobody behind "
                "it may join"
            )
        cut = [r for r, n in got.items() if type(n) is int and n < missing.get(r, 0)]
        charged = sum(missing.get(r, 0) if r in cut else n for r, n in got.items() if type(n) is int)
        short = set(got) < set(expected) or any(got.get(r) != n for r, n in expected.items() if r in got)
        if short and cut and sum(vals) < budget <= charged:
            return (
                f"the budget ran out too early: {cut[0]} got {got[cut[0]]} of the {missing[cut[0]]} tokens it "
                "misses, but the budget was charged for all of them - charge the budget with the tokens you "
                "schedule (the chunk), not with what the request misses"
            )
        if set(got) < set(expected):
            return (
                "there was budget left: a waiting request joins even if only part of its prompt fits "
                "(chunked prefill); the rest comes in the next steps"
            )
        return (
            "running requests first, in order, then waiting ones; each gets min(missing, threshold if > 0, "
            "budget left) and the budget shrinks by that much"
        )

    return hint


def _test(title: str, arrivals: Sequence[Arrival], m: int, b: int, t: int, blocks: int = 64, bs: int = 4) -> None:
    @BUDGET.test(title)
    def _(fn: Any, rec: Any) -> None:
        sim = Sim(arrivals, blocks, bs)
        run_workload(
            lambda s: fn(s.running, s.waiting, s.kv, m, b, t),
            rec,
            sim,
            _describe(m, b, t),
            _hint_for(b, t),
            order_hint="the running requests (their decodes) first, in the order of `running`, then the waiting "
            "prefills with what is left of the budget",
        )


# (title, arrivals, max_num_seqs, token budget, long_prefill_token_threshold[, num_gpu_blocks=64, block_size=4])
# fmt: off
_BUDGET_TESTS: list[tuple[Any, ...]] = [
    ("a long prompt is split into chunks by the token budget",
     [(0, "r0", 20, 2)], 4, 8, 0),
    ("a budget used up exactly: nobody else joins in that step",
     [(0, "r0", 8, 2), (0, "r1", 3, 2)], 4, 8, 0),
    ("decodes first, then prefill chunks with what is left of the budget",
     [(0, "r0", 3, 6), (0, "r1", 2, 6), (2, "r2", 17, 2)], 4, 6, 0),
    ("long_prefill_token_threshold caps a chunk even when budget remains",
     [(0, "r0", 15, 2), (0, "r1", 9, 3), (1, "r2", 2, 3)], 4, 32, 4),
    ("threshold and budget together, with max_num_seqs",
     [(0, "r0", 11, 3), (0, "r1", 7, 2), (0, "r2", 5, 2), (1, "r3", 13, 2)], 2, 10, 6),
    ("a full pool stops admission: the head of the queue waits and nobody overtakes it",
     [(0, "r0", 16, 3), (1, "r1", 12, 2), (1, "r2", 2, 2)], 4, 16, 0, 6, 4),
    ("a random workload, step by step",
     random_arrivals(5, 12, max_prompt=24), 4, 12, 5),
]
# fmt: on
for _args in _BUDGET_TESTS:
    _test(*_args)


# --- differential check (issue 39): random engine states, the learner's step against the reference ----------
from pagedlab.course.exercises.lab04 import batch_case, batch_sim, describe_batch, run_batch_case  # noqa: E402
from pagedlab.grading.differential import differential  # noqa: E402


def _random_state_hint(budget: int, threshold: int) -> Callable[[Any, Any, list[str], dict[str, int]], str | None]:
    """:func:`_hint_for`, first naming the mistakes only random states show (a running request several
    tokens behind, or left out once the budget is used up)."""
    fallback = _hint_for(budget, threshold)

    def hint(expected: Any, got: Any, running_before: list[str], missing: dict[str, int]) -> str | None:
        if isinstance(expected, dict) and isinstance(got, dict):
            zero = [r for r, n in got.items() if type(n) is int and n == 0 and r not in expected]
            if zero:
                return (
                    f"{zero[0]} is listed with 0 tokens: once the budget is used up, stop - a request that gets no "
                    "token is not scheduled in this step (leave it out of the dict)"
                )
            for r in running_before:
                e, g, m = expected.get(r), got.get(r), missing.get(r, 0)
                if e is None or g == e:
                    continue
                if g == 1 and e > 1:
                    return (
                        f"{r} is {m} tokens behind (the engine appended several, as with speculative decoding): a "
                        f"running request gets min(missing, threshold, budget left) = {e}, not 1"
                    )
                if g is None and e < m:
                    return (
                        f"{r} misses {m} tokens and only {e} fit the budget left: a running request gets the part "
                        "that fits (min(missing, threshold, budget left)), decodes included - do not skip it"
                    )
        return fallback(expected, got, running_before, missing)

    return hint


@differential(
    BUDGET,
    batch_case(chunked=True),
    examples=100,
    describe=describe_batch,
    draws="1-3 of lab 04's engine states plus running requests inside their prompt (or re-prefill after a preemption), "
    "a token budget of 1-64 (often used up by the running requests alone, more of them behind) and a "
    "long_prefill_token_threshold of 0-16",
)
def _(fn: Any, case: Any, rec: Any) -> None:
    for state in case:
        m, b, t = state["max_num_seqs"], state["max_num_batched_tokens"], state["long_prefill_token_threshold"]

        def call(s: Any, m: int = m, b: int = b, t: int = t) -> Any:
            return fn(s.running, s.waiting, s.kv, m, b, t)

        run_batch_case(
            call,
            rec,
            batch_sim(state),
            state["steps"],
            _describe(m, b, t),
            _random_state_hint(b, t),
            budget=b,
            threshold=t,
            order_hint="the running requests (their decodes) first, in the order of `running`, then the waiting "
            "prefills with what is left of the budget",
        )
