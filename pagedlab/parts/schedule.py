"""Guards of the scheduling slots: the step (labs 04-06, run as the engine's scheduler), the victim
choice and the preempt-and-retry loop (lab 06). The schedulers here use ``Scheduler``'s public
methods only (``finish_schedule``, the queues)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.parts.contracts import (
    PICK_VICTIM_MUTATES,
    SCHEDULE_STEP,
    SCHEDULE_STEP_MUTATES,
    SCHEDULE_WITH_PREEMPTION,
    check_batch_order,
    check_no_running_skipped,
    check_victim_policy,
    takes_token_budget,
)
from pagedlab.parts.guard import Guard
from pagedlab.parts.protocols import PickVictimFn, PreemptRetryFn, ScheduleStepFn
from pagedlab.request import Request, RequestStatus
from pagedlab.sched.scheduler import ScheduledRequest, Scheduler, SchedulerOutput

__all__ = [
    "guarded_pick_victim",
    "guarded_preempt_retry",
    "LearnerStepScheduler",
    "PreemptingStep",
    "LearnerPreemptingScheduler",
]


def guarded_pick_victim(fn: PickVictimFn, guard: Guard) -> Callable[[list[Request], str], Request]:
    """``fn`` checked: returns one of the running requests and leaves the list as it was."""

    def state(r: Request) -> tuple[Any, ...]:
        return (r.status, r.num_computed_tokens, r.num_tokens, r.priority, r.arrival_time)

    def call(running: list[Request], policy: str) -> Request:
        before, states = list(running), [state(r) for r in running]
        victim = guard.call(fn, running, policy)
        unchanged = len(running) == len(before) and all(a is b for a, b in zip(running, before))
        if not unchanged:
            running[:] = before
        PICK_VICTIM_MUTATES.enforce_read_only(guard, "running", unchanged)
        changed = [r.request_id for r, st in zip(running, states) if state(r) != st]
        if changed:
            raise guard.fail(
                f"it changed request {changed[0]} (status, num_computed_tokens, ...): choosing a victim only "
                "reads the requests; the scheduler preempts it"
            )
        if not any(victim is r for r in running):
            raise guard.fail(f"it returned {victim!r}, which is not one of the running requests")
        check_victim_policy(guard, running, policy, victim)
        chosen: Request = victim
        return chosen

    return call


def guarded_preempt_retry(fn: PreemptRetryFn, guard: Guard) -> PreemptRetryFn:
    """``fn`` checked: preempts only running requests, only after a failed allocation, never after the
    request itself went; returns True exactly when the request runs with its slots allocated."""

    def call(
        request: Request,
        allocate: Callable[[], bool],
        choose_victim: Callable[[], Request],
        preempt: Callable[[Request], None],
    ) -> bool:
        last: list[bool | None] = [None]

        def alloc() -> bool:
            if request.status != RequestStatus.RUNNING:
                raise guard.fail(f"it allocated for {request.request_id} after preempting it")
            last[0] = allocate()
            return bool(last[0])

        def pre(victim: Request) -> None:
            if not isinstance(victim, Request) or victim.status != RequestStatus.RUNNING:
                raise guard.fail(f"it preempted {victim!r}, which is not a running request")
            if request.status != RequestStatus.RUNNING or last[0] is not False:
                raise guard.fail(
                    "it preempted without a failed allocation just before (or after the request itself was preempted)"
                )
            preempt(victim)
            last[0] = None

        ok = guard.call(fn, request, alloc, choose_victim, pre)
        guard.expect_type(ok, bool, "whether the request got its slots")
        running = request.status == RequestStatus.RUNNING
        if running and last[0] is not True:
            raise guard.fail(
                f"it returned while {request.request_id} still runs without its slots "
                "(retry until allocate() succeeds or the request itself is preempted)"
            )
        if ok != running:
            raise guard.fail(
                f"it returned {ok}, but {request.request_id} is {'running with its slots' if running else 'preempted'}"
            )
        checked: bool = ok
        return checked

    return call


class LearnerStepScheduler(Scheduler):
    """The engine's scheduler with a learner's :class:`ScheduleStepFn` as its step.

    The step gets the real ``running`` list, a deque of the waiting requests and the real
    ``KVCacheManager``; afterwards the admitted requests leave the real waiting queue. It must
    not preempt, so the engine gives it a pool large enough for its requests (``my_engine`` does).
    Checked after every step: the running list only grew at its end, by the head of the waiting
    queue in order; ``num_computed_tokens`` untouched; each scheduled request runs and is scheduled
    1 .. missing tokens; the budget and ``long_prefill_token_threshold`` (for a step given them) and
    ``max_num_seqs`` hold; the batch is in running order and skips no running request ahead of a scheduled
    one; no waiting request holds a block; something is scheduled when nothing runs and a request waits
    (else the engine would wait forever); every scheduled token has a KV slot.

    Args (besides ``Scheduler``'s):
        step_fn: the learner's step (the lab 04 signature is bridged by ``pagedlab.grading.plug``).
        guard: the ``schedule_step`` guard.
    """

    def __init__(self, *args: Any, step_fn: ScheduleStepFn, guard: Guard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step_fn, self.guard = step_fn, guard

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput(step=self.step_count)
        if self.tracer is not None:
            self.tracer.step = self.step_count
        cfg = self.config
        before, waiting = list(self.running), deque(self.waiting)
        given = [*before, *waiting]  # the step consumes its copy of waiting: the admitted ones are read from here
        computed = {id(r): r.num_computed_tokens for r in given}
        result = self.guard.call(
            self.step_fn,
            self.running,
            waiting,
            self.kv_cache_manager,
            cfg.max_num_seqs,
            cfg.max_num_batched_tokens,
            cfg.long_prefill_token_threshold,
        )
        SCHEDULE_STEP.enforce(self.guard, result)
        self._admit(before)
        SCHEDULE_STEP_MUTATES.enforce_read_only(
            self.guard,
            "num_computed_tokens",
            all(computed[id(r)] == r.num_computed_tokens for r in given),
        )
        scheduled = [self._scheduled(rid, n) for rid, n in result.items()]
        self._check_step(before, scheduled)
        return self.finish_schedule(out, scheduled, self._budget_left(scheduled))

    def _check_step(self, before: list[Request], scheduled: list[ScheduledRequest]) -> None:
        """What every learner step must leave, whatever it is given: the batch in running order, no running
        request skipped, at most ``max_num_seqs`` running, no block held by a waiting request, progress.

        Raises:
            ComponentError: one of them does not hold.
        """
        cfg = self.config
        check_batch_order(self.guard, self.running, [s.request for s in scheduled])
        alive = [r for r in before if any(r is x for x in self.running)]
        check_no_running_skipped(self.guard, alive, {id(s.request) for s in scheduled})
        if len(self.running) > cfg.max_num_seqs:
            raise self.guard.fail(f"{len(self.running)} requests run > max_num_seqs={cfg.max_num_seqs}")
        for req in self.waiting:
            held = self.kv_cache_manager.get_block_ids(req.request_id)
            if held:
                raise self.guard.fail(
                    f"{req.request_id} is still waiting but holds {len(held)} KV block(s): reserve slots only for "
                    "a request you admit (check max_num_seqs before allocate_slots)"
                )
        if not scheduled and not self.running and (len(self.waiting) or self.swapped):
            head = self.swapped[0] if self.swapped else self.waiting.peek_request()
            raise self.guard.fail(
                f"it scheduled nothing while no request runs and {head.request_id} waits "
                f"({head.num_tokens - head.num_computed_tokens} tokens to compute, "
                f"{self.kv_cache_manager.num_free_blocks} free blocks): the engine would wait forever - a request "
                "at the head of the queue that fits is admitted (a prompt longer than the budget in chunks)"
            )

    def _budget_left(self, scheduled: list[ScheduledRequest]) -> int | None:
        """What the step left of ``max_num_batched_tokens``; None for a step that is not given the budget
        (:func:`~pagedlab.parts.contracts.takes_token_budget`): it is not held to a setting it never sees.

        Raises:
            ComponentError: a step given the budget scheduled more tokens than it holds.
        """
        if not takes_token_budget(self.step_fn):
            return None
        total, limit = sum(s.num_tokens for s in scheduled), self.config.max_num_batched_tokens
        if total > limit:
            raise self.guard.fail(f"token budget exceeded: {total} tokens > max_num_batched_tokens={limit}")
        cap = self.config.long_prefill_token_threshold
        over = next((s for s in scheduled if 0 < cap < s.num_tokens), None)
        if over is not None:
            raise self.guard.fail(
                f"{over.request.request_id} got {over.num_tokens} tokens in one step > long_prefill_token_threshold="
                f"{cap}: every chunk, a running request's included, is capped by it"
            )
        return limit - total

    def _admit(self, before: list[Request]) -> None:
        """Move the requests the step appended to ``running`` out of the real waiting queue."""
        if len(self.running) < len(before) or any(a is not b for a, b in zip(self.running, before)):
            self.running[:] = before
            raise self.guard.fail("it removed or reordered running requests (only append admitted ones)")
        for req in self.running[len(before) :]:
            if not len(self.waiting) or self.waiting.peek_request() is not req:
                del self.running[len(before) :]
                raise self.guard.fail(
                    f"{req.request_id} was admitted out of order or was not waiting "
                    "(admit the head of the waiting queue first)"
                )
            self.waiting.pop_request()
            req.status = RequestStatus.RUNNING
            if req.num_cached_tokens < 0:
                req.num_cached_tokens = 0

    def _scheduled(self, rid: object, n: object) -> ScheduledRequest:
        """The ScheduledRequest for one entry of the step's result, checked."""
        req = self.requests.get(rid) if isinstance(rid, str) else None
        if req is not None and not any(req is r for r in self.running) and req.status == RequestStatus.WAITING:
            raise self.guard.fail(
                f"it scheduled {rid!r} but left it out of the running list it was given: append an admitted "
                "request to that very list (running.append) - a new list bound to `running` is lost"
            )
        if req is not None and req.status in (RequestStatus.PREEMPTED, RequestStatus.SWAPPED):
            raise self.guard.fail(
                f"it scheduled {rid!r}, which it preempted in this step: drop a victim from the step's schedule"
            )
        if req is None or not isinstance(rid, str) or req not in self.running:
            raise self.guard.fail(f"it scheduled {rid!r}, which is not a running request")
        if not isinstance(n, int) or not 1 <= n <= req.num_tokens - req.num_computed_tokens:
            raise self.guard.fail(
                f"{rid}: {n!r} tokens scheduled, expected 1 .. "
                f"{req.num_tokens - req.num_computed_tokens} (its missing tokens)"
            )
        end, bs = req.num_computed_tokens + n, self.cache_config.block_size
        held = len(self.kv_cache_manager.get_block_ids(rid))
        if held * bs < end:
            full = self.kv_cache_manager.block_pool.get_num_free_blocks() == 0
            why = (
                " The pool is full: a step from lab 04/05 assumes every request fits; give the engine more "
                "num_gpu_blocks, or plug lab 06's schedule_with_preemption, which preempts."
                if full
                else ""
            )
            raise self.guard.fail(
                f"request {rid!r}: tokens up to {end} are scheduled but its blocks hold only {held * bs} "
                f"(was allocate_slots called for it, and did it succeed?){why}",
                state={
                    "request": rid,
                    "blocks": self.kv_cache_manager.get_block_ids(rid),
                    "tokens": end,
                    "block_size": bs,
                },
            )
        return ScheduledRequest(req, req.num_computed_tokens, n)


@dataclass(frozen=True)
class PreemptingStep:
    """Lab 06's whole step with preemption in the ``schedule_step`` slot (run by
    :class:`LearnerPreemptingScheduler`): ``fn(running, waiting, swapped, kv_cache_manager,
    max_num_seqs, policy, preemption_mode) -> ({request_id: tokens}, [preempted ids in order])``,
    ``waiting`` and ``swapped`` being deques (exercise ``06.schedule_with_preemption``)."""

    fn: Callable[..., tuple[dict[str, int], list[str]]]

    #: It is not given max_num_batched_tokens, so it is not held to it (:func:`takes_token_budget`).
    takes_token_budget: ClassVar[bool] = False

    #: Slots whose work this step does itself (the kit's parts there stay unused): see ``Components.owner``.
    covers: ClassVar[dict[str, str]] = {
        "preempt_retry": "in your schedule_with_preemption: it preempts, frees or swaps, and retries itself",
        "pick_victim": "in your schedule_with_preemption: it chooses its victims itself",
    }

    @property
    def __name__(self) -> str:
        return str(getattr(self.fn, "__name__", "schedule_with_preemption"))


class _RecordingKV:
    """The ``KVCacheManager`` as a preempting step sees it: every call goes through, and the block
    moves of ``swap_out`` / ``swap_in`` (which the step does not return) are kept for the model runner,
    pending copy-on-write copies first, as ``Scheduler._preempt`` does."""

    def __init__(self, kv: KVCacheManager, out: SchedulerOutput) -> None:
        self._kv, self._out = kv, out
        self.swapped_out: list[str] = []
        self.swapped_in: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    def swap_out(self, requests: list[Request]) -> list[tuple[int, int]]:
        self._out.add_moves("copy", self._kv.take_pending_copies())
        moves = self._kv.swap_out(requests)
        self._out.add_moves("swap_out", moves)
        self.swapped_out += [r.request_id for r in requests]
        return moves

    def swap_in(self, requests: list[Request]) -> list[tuple[int, int]]:
        self._out.add_moves("copy", self._kv.take_pending_copies())
        moves = self._kv.swap_in(requests)
        self._out.add_moves("swap_in", moves)
        self.swapped_in += [r.request_id for r in requests]
        return moves


class LearnerPreemptingScheduler(LearnerStepScheduler):
    """The engine's scheduler with lab 06's ``schedule_with_preemption`` (a :class:`PreemptingStep`) as its step.

    The step gets the real ``running`` list, deques of the waiting and swapped requests and the
    ``KVCacheManager`` (swap moves recorded for the model runner). Checked after every step, besides
    :class:`LearnerStepScheduler`'s checks (budget, ``max_num_seqs``, a KV slot for every scheduled
    token): each preempted request ran before the step, runs no more and is the policy's victim
    (``pick_victim``) among those still running; no request left running unlisted; a recomputed one holds no
    block, has ``num_computed_tokens`` 0 and was put at the front of the step's ``waiting`` as it was
    preempted, a swapped one went through ``swap_out``, holds no GPU block and was appended to ``swapped``;
    nothing was admitted or swapped in during a step that preempted; swapped requests come back from the
    head of the swapped queue, in order, and no waiting request joins while one is swapped out. The kit
    then moves the victims in its own queues (recompute: the head of ``waiting``; swap: the end of
    ``swapped``).
    """

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput(step=self.step_count)
        if self.tracer is not None:
            self.tracer.step = self.step_count
        cfg, before = self.config, list(self.running)
        waiting, swapped = deque(self.waiting), deque(self.swapped)
        computed = {id(r): r.num_computed_tokens for r in [*before, *waiting, *swapped]}
        kv = _RecordingKV(self.kv_cache_manager, out)
        fn = self.step_fn.fn if isinstance(self.step_fn, PreemptingStep) else self.step_fn
        args = (self.running, waiting, swapped, kv, cfg.max_num_seqs, cfg.policy, cfg.preemption_mode)
        result = self.guard.call(fn, *args)
        SCHEDULE_WITH_PREEMPTION.enforce(self.guard, result)
        sched, preempted = result
        unlisted = [r for r in before if r.request_id not in preempted and not any(r is x for x in self.running)]
        if unlisted:
            self.running[:] = before
            raise self.guard.fail(
                f"{unlisted[0].request_id} left running but is not in the preempted list: return every victim "
                "of the step, in the order preempted"
            )
        victims = self._take_victims(before, preempted, kv, waiting, swapped, out)
        gone = {id(r) for r in victims}
        if any(
            computed.get(id(r), r.num_computed_tokens) != r.num_computed_tokens
            for r in computed_of(before, waiting, swapped, self.running)  # admitted / swapped in: now running
            if id(r) not in gone
        ):
            raise self.guard.fail("it changed num_computed_tokens (the engine advances it after the step)")
        if not victims:
            back = self._take_swapped_in(before, kv)
            if self.swapped and len(self.running) > len(back):
                raise self.guard.fail(
                    f"it admitted {self.running[len(back)].request_id} while {self.swapped[0].request_id} is "
                    "swapped out: swapped requests come back first, waiting ones join only when none is left"
                )
            self._admit(back)
        elif [id(r) for r in self.running] != [id(r) for r in before if id(r) not in gone]:
            raise self.guard.fail("it admitted, swapped in or reordered requests in a step that preempted")
        scheduled = [self._scheduled(rid, n) for rid, n in sched.items()]
        self._check_step(before, scheduled)
        return self.finish_schedule(out, scheduled, self._budget_left(scheduled))

    def _take_victims(
        self,
        before: list[Request],
        preempted: list[Any],
        kv: _RecordingKV,
        waiting: deque[Request],
        swapped: deque[Request],
        out: SchedulerOutput,
    ) -> list[Request]:
        """Check each preempted request and move it in the kit's queues; return them."""
        self._check_requeued(preempted, kv, waiting, swapped)
        victims: list[Request] = []
        for rid in preempted:
            req = next((r for r in before if r.request_id == rid), None)
            if req is None or any(v is req for v in victims):
                raise self.guard.fail(f"it preempted {rid!r}, which was not running (or twice)")
            check_victim_policy(
                self.guard, [r for r in before if not any(r is v for v in victims)], self.config.policy, req
            )
            if any(r is req for r in self.running):
                raise self.guard.fail(f"{rid} was preempted but is still in running")
            if self.kv_cache_manager.get_block_ids(rid):
                raise self.guard.fail(f"{rid} was preempted but still holds GPU blocks (free or swap_out it)")
            if rid in kv.swapped_out:
                if not any(r is req for r in swapped):
                    raise self.guard.fail(f"{rid} was swapped out but not appended to swapped")
                req.status = RequestStatus.SWAPPED
                self.swapped.append(req)
            else:
                if req.num_computed_tokens != 0 or not any(r is req for r in waiting):
                    raise self.guard.fail(
                        f"{rid} was freed for recompute but not reset (num_computed_tokens 0) and put back in waiting"
                    )
                req.status = RequestStatus.PREEMPTED
                self.waiting.prepend_request(req)
            req.num_preemptions += 1
            out.preempted.append(rid)
            victims.append(req)
        return victims

    def _check_requeued(
        self, preempted: list[Any], kv: _RecordingKV, waiting: deque[Request], swapped: deque[Request]
    ) -> None:
        """The victims sit where the step puts them: each recompute victim at the front of ``waiting`` as it
        was preempted (so the last one first), the swapped ones at the end of ``swapped`` in order. The engine
        then moves them in its own queues from ``preempted``.

        Raises:
            ComponentError: a victim is elsewhere in the step's queues.
        """
        recomputed = [r for r in preempted if r not in kv.swapped_out]
        ids = [r.request_id for r in waiting][: len(recomputed)]
        if (
            len(recomputed) == len(set(recomputed))
            and ids != recomputed[::-1]
            and set(recomputed) <= {r.request_id for r in waiting}
        ):
            raise self.guard.fail(
                f"waiting begins {ids} after preempting {recomputed} for recompute: put each victim at the FRONT "
                "of waiting as you preempt it (waiting.appendleft), the last one preempted first"
            )
        out = [r for r in preempted if r in kv.swapped_out]
        tail = [r.request_id for r in swapped][len(swapped) - len(out) :] if out else []
        if tail != out and set(out) <= {r.request_id for r in swapped}:
            raise self.guard.fail(
                f"swapped ends {tail} after swapping out {out}: append each victim to swapped, in order"
            )

    def _take_swapped_in(self, before: list[Request], kv: _RecordingKV) -> list[Request]:
        """Move the requests the step swapped in (the head of ``swapped``, in order) to running; return
        ``before`` plus them (the start of the running list :meth:`_admit` checks)."""
        grown = list(before)
        for req in self.running[len(before) :]:
            if req.request_id not in kv.swapped_in:
                break
            if not self.swapped or self.swapped[0] is not req:
                raise self.guard.fail(f"{req.request_id} was swapped in out of order (the head of swapped first)")
            self.swapped.popleft()
            req.status = RequestStatus.RUNNING
            grown.append(req)
        return grown


def computed_of(*groups: Any) -> list[Request]:
    """The requests of ``groups`` (lists / deques), each once."""
    seen: dict[int, Request] = {}
    for g in groups:
        for r in g:
            seen.setdefault(id(r), r)
    return list(seen.values())
