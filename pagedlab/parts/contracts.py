"""Contract checks the guards share: what the exercises state beyond their results (an object changed in
place, a dtype kept, the batch in running order). One function per contract, so a guard and an exercise
test that need the same rule call the same code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pagedlab.parts.guard import Guard
from pagedlab.request import Request
from pagedlab.sched.scheduler import pick_victim

__all__ = [
    "check_changed_in_place",
    "check_same_dtype",
    "check_batch_order",
    "check_no_running_skipped",
    "check_victim_policy",
    "takes_token_budget",
]


def check_changed_in_place(guard: Guard, what: str, given: Any, after: Any) -> None:
    """``after`` must be the very object ``given``: the part changes it in place, the engine holds it.

    Raises:
        ComponentError: the part bound a new object instead.
    """
    if after is not given:
        raise guard.fail(
            f"it bound a new object to {what} instead of changing the one it was given in place (the engine "
            "keeps that one, so the change would be lost)"
        )


def check_same_dtype(guard: Guard, what: str, got: torch.Tensor, source: torch.Tensor) -> None:
    """``got`` keeps ``source``'s dtype (a tile of an fp16 cache is fp16).

    Raises:
        ComponentError: it does not.
    """
    if got.dtype != source.dtype:
        raise guard.fail(f"{what} is {got.dtype}, but the cache is {source.dtype}: a tile keeps the cache's dtype")


def check_batch_order(guard: Guard, running: Sequence[Request], scheduled: Sequence[Request]) -> None:
    """The scheduled requests come in the order they run (``running``'s order: oldest first, then the
    admitted ones), as the exercises state and the engine batches them.

    Raises:
        ComponentError: two scheduled requests are in the other order.
    """
    place = {id(r): i for i, r in enumerate(running)}
    order = [place[id(r)] for r in scheduled if id(r) in place]
    for a, b in zip(order, order[1:]):
        if b < a:
            raise guard.fail(
                f"it scheduled {running[b].request_id} before {running[a].request_id}, which runs ahead of it: "
                "walk the running requests in order, oldest first"
            )


def check_no_running_skipped(guard: Guard, running: Sequence[Request], scheduled: set[int]) -> None:
    """Of the requests that ran before the step and still run (``running``, in order), the scheduled ones
    (``id()``s in ``scheduled``) come first: the pass gives each running request its tokens in turn and, when
    it stops (the budget is spent, the request itself was preempted), leaves out only the ones after it.

    Raises:
        ComponentError: a running request was left out while one after it was scheduled.
    """
    for i, r in enumerate(running):
        later = next((x for x in running[i + 1 :] if id(x) in scheduled), None)
        if id(r) not in scheduled and later is not None:
            raise guard.fail(
                f"it skipped {r.request_id}, which runs ahead of {later.request_id} (scheduled): each running "
                "request gets its tokens in turn; a pass that stops leaves out only the requests after it"
            )


def check_victim_policy(guard: Guard, running: Sequence[Request], policy: str, victim: Request) -> None:
    """``victim`` is the request ``policy`` preempts among ``running`` (the kit's
    :func:`~pagedlab.sched.scheduler.pick_victim`: fcfs the end of the list, priority the largest
    ``(priority, arrival_time)``).

    Raises:
        ComponentError: another request was chosen.
    """
    want = pick_victim(list(running), policy)
    if victim is not want:
        rule = (
            "the largest (priority, arrival_time): a larger value is less important"
            if policy == "priority"
            else "the end of the running list, the request admitted last"
        )
        raise guard.fail(
            f"it preempted {victim.request_id}, but {policy!r} preempts {want.request_id} ({rule}) among "
            f"{[r.request_id for r in running]}"
        )


def takes_token_budget(step_fn: Any) -> bool:
    """Whether a ``schedule_step`` part is given the token budget: lab 05's step is; lab 04's (bridged,
    ``takes_token_budget = False``) and lab 06's (:class:`~pagedlab.parts.schedule.PreemptingStep`) are not."""
    return bool(getattr(step_fn, "takes_token_budget", True))
