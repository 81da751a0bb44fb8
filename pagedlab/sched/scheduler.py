"""Iteration-level scheduler (continuous batching), following vLLM v1's ``Scheduler.schedule``.

Every step closes the gap ``num_tokens - num_computed_tokens`` of as many requests as fit:

1. RUNNING requests first, in order, each getting ``min(gap, long_prefill_token_threshold,
   token budget)`` tokens (the threshold only when the step starts with more than one unfinished
   request: vLLM 0.32 lifts it for a lone request, which has nobody to starve). If the KV-cache manager cannot allocate, a victim is preempted
   (fcfs: the newest running request; priority: the largest ``(priority, arrival_time)``)
   until it can, or until the request itself was the victim.
2. SWAPPED requests are swapped back in (vLLM v0; v1 has no swap), only if nothing was
   preempted in this step.
3. WAITING requests are admitted, only if nothing was preempted or is swapped out, until
   ``max_num_seqs`` or the budget is reached; prefix-cache hits are looked up first. A waiting
   request that cannot be allocated blocks the queue (strict head-of-line order).

Progress guarantee: every request the engine accepts finishes. ``LLMEngine.validate_request``
rejects at submission a request that can never be scheduled (more KV blocks than the pool, or,
with ``enable_chunked_prefill=False``, a prompt longer than ``max_num_batched_tokens``). The one
case that only arises later, a recompute-preempted request whose prompt plus generated tokens
has outgrown the budget with chunking off, is aborted here (finish reason ``"abort"``, a
``pagedlab`` logger warning, listed in ``SchedulerOutput.rejected``) instead of being retried
forever; vLLM v0 likewise marks such a group FINISHED_IGNORED.

Prefill, chunked prefill, decode and resumption after preemption are the same rule. After
scheduling, ``num_computed_tokens`` is advanced at once (as vLLM's ``_update_after_schedule``)
so the next step can schedule the next chunk.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.errors import InvalidRequestError
from pagedlab.request import Request, RequestStatus
from pagedlab.sched.request_queue import create_request_queue

logger = logging.getLogger("pagedlab")

if TYPE_CHECKING:
    from pagedlab.core.kv_cache_manager import KVCacheManager
    from pagedlab.trace import Tracer

#: Environment variable that turns on ``Scheduler.check_postconditions`` ("1"; "" or "0" = off).
CHECK_INVARIANTS_ENV = "PAGEDLAB_CHECK_INVARIANTS"


@dataclass
class ScheduledRequest:
    """One request's share of a step: tokens ``[start, start + num_tokens)`` get computed.

    Attributes:
        is_prefill: prompt (or resumed) tokens, as opposed to the decode of one generated token.
        samples: the chunk reaches the end of the sequence, so a token is sampled after it.
        block_ids: the request's whole block table (physical block ids) for this step, set by
            ``Scheduler.finish_schedule``: what the model runner needs for the slot mapping and the
            attention block tables, so it never asks the KV-cache manager. vLLM 0.32.0's
            ``SchedulerOutput`` carries ``NewRequestData.block_ids`` (a new request's table) and
            ``CachedRequestData.new_block_ids`` (blocks appended since), which its runner appends to a
            persistent ``BlockTable``; the kit sends the whole table every step, because its
            copy-on-write and swap (vLLM v0 features) rewrite tables in place.
    ``is_prefill`` and ``samples`` are fixed when the request is scheduled (before the step's token is
    appended).
    """

    request: Request
    start: int
    num_tokens: int
    is_prefill: bool = field(init=False)
    samples: bool = field(init=False)
    block_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        r = self.request
        end = self.start + self.num_tokens
        self.samples = end == r.num_tokens
        self.is_prefill = not (
            self.num_tokens == 1 and r.num_output_tokens > 0 and self.samples and self.start >= r.num_prompt_tokens
        )


@dataclass
class SchedulerOutput:
    """What one step computes and which KV data must move before the forward pass.

    Attributes:
        step: step number (0-based).
        scheduled: requests and their token counts, in scheduling order.
        preempted: ids preempted in this step (recompute or swap).
        block_moves: ``(kind, src, dst)`` in the order they arose while scheduling, kind one of
            "copy" (copy-on-write, GPU to GPU), "swap_out" (GPU to CPU), "swap_in" (CPU to GPU).
            Order matters: a block freed by a swap-out may be popped again as a CoW target in
            the same step, and a CoW copy may be swapped out later in the step.
        rejected: requests aborted in this step because they can never be scheduled again
            (see the module's progress guarantee); their blocks are already freed.
    """

    step: int
    scheduled: list[ScheduledRequest] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    block_moves: list[tuple[str, int, int]] = field(default_factory=list)
    rejected: list[Request] = field(default_factory=list)

    def _moves(self, kind: str) -> list[tuple[int, int]]:
        return [(s, d) for k, s, d in self.block_moves if k == kind]

    @property
    def blocks_to_swap_out(self) -> list[tuple[int, int]]:
        return self._moves("swap_out")

    @property
    def blocks_to_swap_in(self) -> list[tuple[int, int]]:
        return self._moves("swap_in")

    @property
    def blocks_to_copy(self) -> list[tuple[int, int]]:
        return self._moves("copy")

    def add_moves(self, kind: str, pairs: Iterable[tuple[int, int]]) -> None:
        self.block_moves.extend((kind, s, d) for s, d in pairs)

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(s.num_tokens for s in self.scheduled)

    @property
    def num_scheduled_tokens(self) -> dict[str, int]:
        return {s.request.request_id: s.num_tokens for s in self.scheduled}


def pick_victim(running: list[Request], policy: str) -> Request:
    """The running request to preempt (vLLM 0.11 ``Scheduler.schedule``): fcfs, the last admitted;
    priority, the largest ``(priority, arrival_time)``. ``running`` is not changed."""
    if policy == "priority":
        return max(running, key=lambda r: (r.priority, r.arrival_time))
    return running[-1]


def preempt_and_retry(
    request: Request,
    allocate: Callable[[], bool],
    choose_victim: Callable[[], Request],
    preempt: Callable[[Request], None],
) -> bool:
    """The preempt-and-retry loop (vLLM 0.11 ``Scheduler.schedule``, running requests): while the
    allocation fails, preempt the chosen victim; stop when it succeeds or ``request`` itself was the
    victim. Returns whether ``request`` got its slots."""
    while not allocate():
        preempt(choose_victim())
        if request.status != RequestStatus.RUNNING:
            return False
    return True


#: ``pick_victim``'s shape: ``(running, policy) -> victim``.
PickVictim = Callable[[list[Request], str], Request]
#: ``preempt_and_retry``'s shape: ``(request, allocate, choose_victim, preempt) -> got its slots``.
PreemptRetry = Callable[[Request, Callable[[], bool], Callable[[], Request], Callable[[Request], None]], bool]


class Scheduler:
    """Continuous batching over a ``KVCacheManager``.

    Args:
        scheduler_config: limits and policies (``max_num_seqs``, ``max_num_batched_tokens`` ...).
        cache_config: block size and pool sizes.
        kv_cache_manager: a ``pagedlab.core.kv_cache_manager.KVCacheManager``.
        tracer: optional ``pagedlab.trace.Tracer``; records schedule/preempt/swap/finish events.
        pick_victim_fn, preempt_retry_fn: the victim choice and the preempt-and-retry loop the running
            phase calls; default the kit's ``pick_victim`` and ``preempt_and_retry`` (the engine passes
            a learner's guarded part here: ``pagedlab.parts.build``).
    """

    def __init__(
        self,
        scheduler_config: SchedulerConfig,
        cache_config: CacheConfig,
        kv_cache_manager: KVCacheManager,
        tracer: Tracer | None = None,
        *,
        pick_victim_fn: PickVictim | None = None,
        preempt_retry_fn: PreemptRetry | None = None,
    ) -> None:
        self.config = scheduler_config
        self.cache_config = cache_config
        self.kv_cache_manager = kv_cache_manager
        self.tracer = tracer
        self.requests: dict[str, Request] = {}
        self.waiting = create_request_queue(scheduler_config.policy)
        self.running: list[Request] = []
        self.swapped: deque[Request] = deque()
        self.step_count = 0
        self._rejected: list[Request] = []
        # This step's long-prefill cap (``schedule`` sets it; 0 = none): the configured threshold, or 0
        # when the step starts with a lone unfinished request.
        self._long_prefill_cap = scheduler_config.long_prefill_token_threshold
        # Postcondition checks after every step (vLLM asserts them); off unless the environment
        # sets PAGEDLAB_CHECK_INVARIANTS (the test suite does), so they cost nothing in the labs.
        self.check_postconditions = os.environ.get(CHECK_INVARIANTS_ENV, "0") not in ("", "0")
        # Fork groups (vLLM v0's SequenceGroup): member id -> the list of live members, one list
        # object shared by the whole group. A request never forked has no entry.
        self._fork_groups: dict[str, list[Request]] = {}
        # The victim choice and the preempt-and-retry loop the running phase calls.
        self.pick_victim_fn: PickVictim = pick_victim_fn or pick_victim
        self.preempt_retry_fn: PreemptRetry = preempt_retry_fn or preempt_and_retry

    # --- queue management ------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        self.requests[request.request_id] = request
        self.waiting.add_request(request)

    def fork_request(self, parent: Request, child: Request) -> None:
        """Fork running ``parent`` into ``child`` (vLLM v0 ``Scheduler.fork_seq``), admitted as RUNNING.

        The child shares every block of the parent copy-on-write (``KVCacheManager.fork``) and
        joins its fork group: swap preemption moves a group as a unit, so sharing survives.
        Groups are tracked structurally; request ids are never parsed.

        Raises:
            InvalidRequestError: the parent is not running here, or the child's id is in use
                (nothing changes); see also ``KVCacheManager.fork``.
        """
        if self.requests.get(parent.request_id) is not parent or parent.status != RequestStatus.RUNNING:
            raise InvalidRequestError(f"cannot fork {parent.request_id!r}: it is not a running request")
        if child.request_id in self.requests:
            raise InvalidRequestError(f"request id {child.request_id!r} is already in use")
        self.kv_cache_manager.fork(parent, child)
        group = self._fork_groups.setdefault(parent.request_id, [parent])
        group.append(child)
        self._fork_groups[child.request_id] = group
        self.requests[child.request_id] = child
        child.status = RequestStatus.RUNNING
        self.running.append(child)

    def get_fork_group(self, request: Request) -> list[Request]:
        """The live members of ``request``'s fork group in fork order (``[request]`` if never forked)."""
        return list(self._fork_groups.get(request.request_id, [request]))

    def drop_all_requests(self) -> dict[str, Request]:
        """Forget every request and fork group without freeing any block; return them by id.

        For ``LLMEngine``'s recovery after a failed step, which frees the blocks itself. Fork-group
        members count even if the failure left them out of ``requests`` (a half-done fork), and a
        stale group must not survive: a later request reusing an id (beam search's ``beam0``)
        would join it.
        """
        known = dict(self.requests)
        for group in self._fork_groups.values():
            known.update((m.request_id, m) for m in group)
        self.running.clear()
        self.swapped.clear()
        while len(self.waiting):
            self.waiting.pop_request()
        self.requests.clear()
        self._fork_groups.clear()
        return known

    def has_unfinished_requests(self) -> bool:
        return bool(self.running or len(self.waiting) or self.swapped)

    def get_num_unfinished_requests(self) -> int:
        return len(self.running) + len(self.waiting) + len(self.swapped)

    def finish_requests(self, request_ids: str | Iterable[str], status: RequestStatus) -> list[Request]:
        """End requests in any state (abort, stop string): free their blocks everywhere."""
        done = []
        for rid in [request_ids] if isinstance(request_ids, str) else request_ids:
            req = self.requests.get(rid)
            if req is None or req.is_finished():
                continue
            if req.status == RequestStatus.RUNNING:
                self.running.remove(req)
            elif req.status == RequestStatus.SWAPPED:
                self.swapped.remove(req)
            else:
                self.waiting.remove_request(req)
            req.status = status
            self._free(req)
            done.append(req)
        return done

    def _free(self, req: Request) -> None:
        self.kv_cache_manager.free(req)
        del self.requests[req.request_id]
        group = self._fork_groups.pop(req.request_id, None)
        if group is not None:
            group.remove(req)
        self._record("finish", req=req.request_id, reason=req.get_finished_reason())

    def _record(self, kind: str, **data: Any) -> None:
        if self.tracer is not None:
            self.tracer.record(kind, **data)

    # --- the step ----------------------------------------------------------------------------
    def _step_long_prefill_cap(self) -> int:
        """The long-prefill cap for the step about to be scheduled: ``long_prefill_token_threshold``, or 0
        (no cap) when only one request is unfinished (running, waiting or swapped).

        vLLM 0.32.0 ``Scheduler.schedule`` (``vllm/v1/core/sched/scheduler.py``, lines 640-649): "When it
        is the only request there is nobody to starve, so let it use the whole budget"; it counts
        ``get_request_counts()`` (running + waiting) once, before the running phase. vLLM 0.11 capped
        every request. The kit's swapped requests (an extension, no vLLM counterpart) count as competing.
        """
        t = self.config.long_prefill_token_threshold
        return t if self.get_num_unfinished_requests() > 1 else 0

    def _cap_long_prefill(self, n: int) -> int:
        """``n`` capped by this step's long-prefill cap when there is one (> 0)."""
        t = self._long_prefill_cap
        return t if 0 < t < n else n

    def _clip(self, n: int, budget: int) -> int:
        """Tokens to schedule of a gap of ``n``: the long-prefill cap first, then the budget."""
        return min(self._cap_long_prefill(n), budget)

    def _pick_victim(self) -> Request:
        return self.pick_victim_fn(self.running, self.config.policy)

    def _preempt(self, victim: Request, out: SchedulerOutput, scheduled: dict[str, ScheduledRequest]) -> int:
        """Preempt ``victim``; return the token budget refunded by unscheduling preempted requests.

        Swap mode moves the victim's whole running fork group to the CPU pool at once (vLLM v0
        swapped the SequenceGroup), so blocks the siblings share are copied once and stay shared.
        When the CPU pool cannot take the group, or in recompute mode, only the victim is
        preempted by recompute: its KV is dropped, its tokens kept, and it is re-queued at the head.
        """
        kv = self.kv_cache_manager
        group = [m for m in self.get_fork_group(victim) if m.status == RequestStatus.RUNNING]
        swap = self.config.preemption_mode == "swap" and kv.can_swap_out(group)
        members = group if swap else [victim]
        refund = 0
        for m in members:
            self.running.remove(m)
            m.num_preemptions += 1
            out.preempted.append(m.request_id)
            if m.request_id in scheduled:  # already scheduled this step: refund it
                refund += scheduled.pop(m.request_id).num_tokens
        if swap:
            out.add_moves("copy", kv.take_pending_copies())  # copies made before this swap-out
            out.add_moves("swap_out", kv.swap_out(members))
            for m in members:
                m.status = RequestStatus.SWAPPED
                self.swapped.append(m)
                self._record("preempt", req=m.request_id, mode="swap")
            return refund
        kv.free(victim)
        victim.status = RequestStatus.PREEMPTED
        victim.num_computed_tokens = 0
        self.waiting.prepend_request(victim)
        self._record("preempt", req=victim.request_id, mode="recompute")
        return refund

    def _admits_waiting(self) -> bool:
        """Whether step 3 may admit waiting requests (always, for continuous batching)."""
        return True

    def schedule(self) -> SchedulerOutput:
        """Pick this step's requests and token counts; allocate their KV slots.

        Three phases share one token budget, in vLLM's order (v1 ``Scheduler.schedule``; swap as v0):
        running requests, then swapped fork groups, then waiting requests.

        Returns:
            A ``SchedulerOutput``; ``num_computed_tokens`` of every scheduled request is
            already advanced by its token count.
        """
        out = SchedulerOutput(step=self.step_count)
        if self.tracer is not None:
            self.tracer.step = self.step_count
        scheduled: dict[str, ScheduledRequest] = {}
        self._long_prefill_cap = self._step_long_prefill_cap()
        budget = self._schedule_running(out, scheduled, self.config.max_num_batched_tokens)
        budget = self._schedule_swapped(out, scheduled, budget)
        budget = self._schedule_waiting(out, scheduled, budget)
        return self.finish_schedule(out, list(scheduled.values()), budget)

    def _schedule_running(self, out: SchedulerOutput, scheduled: dict[str, ScheduledRequest], budget: int) -> int:
        """Phase 1: each running request, in order, gets its missing tokens (clipped to the budget);
        when its slots do not fit, preempt victims and retry. Returns the budget left."""
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = self._clip(req.num_tokens - req.num_computed_tokens, budget)
            if n <= 0:
                i += 1
                continue
            budget += self._allocate_or_preempt(req, n, out, scheduled)
            if req.status != RequestStatus.RUNNING:
                break  # req itself (or its group) was preempted: stop here
            scheduled[req.request_id] = ScheduledRequest(req, req.num_computed_tokens, n)
            budget -= n
            i = self.running.index(req) + 1
        return budget

    def _allocate_or_preempt(
        self, req: Request, n: int, out: SchedulerOutput, scheduled: dict[str, ScheduledRequest]
    ) -> int:
        """Allocate ``n`` slots for running ``req``, preempting victims until that succeeds or ``req``
        itself was preempted (``preempt_retry_fn``); return the token budget the preemptions refunded."""
        refund = 0

        def preempt(victim: Request) -> None:
            nonlocal refund
            refund += self._preempt(victim, out, scheduled)

        def allocate() -> bool:
            return self.kv_cache_manager.allocate_slots(req, n) is not None

        self.preempt_retry_fn(req, allocate, self._pick_victim, preempt)
        return refund

    def _schedule_swapped(self, out: SchedulerOutput, scheduled: dict[str, ScheduledRequest], budget: int) -> int:
        """Phase 2: swapped fork groups come back whole (vLLM v0), only if nobody was preempted this
        step and the group fits in seats and blocks. Returns the budget left."""
        kv = self.kv_cache_manager
        while not out.preempted and self.swapped and budget > 0:
            group = [m for m in self.get_fork_group(self.swapped[0]) if m.status == RequestStatus.SWAPPED]
            seats = self._seats_taken(self.running) + self._seats_taken(group)
            if seats > self.config.max_num_seqs or not kv.can_swap_in(group):
                break
            out.add_moves("copy", kv.take_pending_copies())
            out.add_moves("swap_in", kv.swap_in(group))
            for req in group:
                self.swapped.remove(req)
                req.status = RequestStatus.RUNNING
                self.running.append(req)
                self._record("swap_in_req", req=req.request_id)
                n = self._clip(req.num_tokens - req.num_computed_tokens, budget)
                if n > 0 and kv.allocate_slots(req, n) is not None:
                    scheduled[req.request_id] = ScheduledRequest(req, req.num_computed_tokens, n)
                    budget -= n
        return budget

    def _schedule_waiting(self, out: SchedulerOutput, scheduled: dict[str, ScheduledRequest], budget: int) -> int:
        """Phase 3: admit waiting requests in strict head-of-line order, only if nothing was
        preempted and nothing waits to swap in. Returns the budget left."""
        while (
            self._admits_waiting()
            and not out.preempted
            and not self.swapped
            and len(self.waiting)
            and budget > 0
            and self._has_seats_for(self.waiting.peek_request())
        ):
            head = self.waiting.peek_request()
            s = self._try_admit(head, budget)
            if s is None:
                if head.is_finished():
                    continue  # rejected as unschedulable: next head
                break  # strict head-of-line order
            scheduled[s.request.request_id] = s
            budget -= s.num_tokens
        return budget

    def _seats(self, req: Request) -> int:
        """Seats ``req`` takes under ``max_num_seqs``: ``n`` for a request that will fork into its
        ``n`` completions after its first token (vLLM v0 ``SequenceGroup.get_max_num_running_seqs``),
        else one."""
        return req.sampling_params.n if req.num_output_tokens == 0 and req.request_id not in self._fork_groups else 1

    def _seats_taken(self, reqs: Iterable[Request]) -> int:
        """Seats held by ``reqs``: a running request that has not forked yet holds its ``n`` (as
        vLLM v0's budget counts each running group by ``get_max_num_running_seqs``), so its
        children never push ``running`` past ``max_num_seqs``."""
        return sum(self._seats(r) for r in reqs)

    def _has_seats_for(self, req: Request) -> bool:
        """Whether ``max_num_seqs`` leaves room for ``req`` next to the running requests' seats."""
        return self._seats_taken(self.running) + self._seats(req) <= self.config.max_num_seqs

    def _try_admit(self, req: Request, budget: int | None) -> ScheduledRequest | None:
        """Admit the head of the waiting queue if its KV slots can be allocated.

        Prefix-cache hits are looked up first (only for a request with nothing computed), so
        the chunk is sized *after* the hit length is known (bug B8, docs/bugs.md#b8). ``budget=None``
        schedules the whole remaining prompt (static batching). Returns None, changing
        nothing, when the request does not fit: with ``scheduler_reserve_full_isl`` (vLLM 0.32.0's
        default) its whole known sequence must fit, not only this chunk.
        """
        kv = self.kv_cache_manager
        hit_blocks, num_hit = kv.get_computed_blocks(req) if req.num_computed_tokens == 0 else ([], 0)
        n = req.num_tokens - num_hit
        if budget is not None:
            # vLLM ``Scheduler.schedule`` (0.11 and 0.32): cap by the threshold *before* the "does
            # the unchunked prefill fit the budget" check, then clip to the budget.
            n = self._cap_long_prefill(n)
            if not self.config.enable_chunked_prefill and n > self.config.max_num_batched_tokens:
                self._reject_unschedulable(req, n)
                return None
            if not self.config.enable_chunked_prefill and n > budget:
                return None
            n = min(n, budget)
        # vLLM 0.32.0 ``Scheduler.schedule`` (vllm/v1/core/sched/scheduler.py:1270) passes
        # ``full_sequence_must_fit=self.scheduler_reserve_full_isl`` when admitting from the waiting queue.
        full = self.config.scheduler_reserve_full_isl
        if (
            kv.allocate_slots(req, n, num_hit, hit_blocks, self._watermark_blocks(), full_sequence_must_fit=full)
            is None
        ):
            return None
        if req.num_computed_tokens == 0:  # it was looked up: count it, once
            kv.record_prefix_cache_stats(req, hit_blocks)
        self.waiting.pop_request()
        req.status = RequestStatus.RUNNING
        req.num_computed_tokens = num_hit
        if req.num_cached_tokens < 0:
            req.num_cached_tokens = num_hit
        self.running.append(req)
        return ScheduledRequest(req, num_hit, n)

    def _watermark_blocks(self) -> int:
        """Blocks a waiting request's admission must leave free (vLLM 0.32 ``KVCacheManager``:
        ``int(watermark * num_blocks)``, applied only when ``has_scheduled_reqs=bool(self.running)``).
        vLLM's ``num_blocks`` counts its null block, one more than the kit's usable ``num_gpu_blocks``
        (``EngineArgs``: ``num_gpu_blocks_override=n`` gives ``n - 1``), so the same settings keep the
        same number of blocks free on both engines."""
        if not self.running:
            return 0
        return int(self.config.watermark * (self.kv_cache_manager.num_gpu_blocks + 1))

    def _reject_unschedulable(self, req: Request, num_tokens: int) -> None:
        """Abort the waiting head ``req``, which needs ``num_tokens`` in one step with chunking off.

        Through ``LLMEngine`` only a recompute-preempted request gets here (longer prompts are
        refused at submission): its prompt plus generated tokens outgrew ``max_num_batched_tokens``,
        so retrying would spin forever. Frees its blocks and queues it for ``SchedulerOutput.rejected``.
        """
        self.waiting.pop_request()
        req.status = RequestStatus.FINISHED_ABORTED
        self._free(req)
        self._rejected.append(req)
        logger.warning(
            "request %s aborted: it must compute %d tokens (prompt + tokens generated before a preemption) in "
            "one step, more than max_num_batched_tokens=%d with enable_chunked_prefill=False. Enable chunked "
            "prefill, raise max_num_batched_tokens or use preemption_mode='swap'",
            req.request_id,
            num_tokens,
            self.config.max_num_batched_tokens,
        )

    def finish_schedule(
        self, out: SchedulerOutput, scheduled: list[ScheduledRequest], token_budget: int | None
    ) -> SchedulerOutput:
        """The end of every step, whoever chose its requests (this class, ``StaticScheduler`` or a step
        from ``pagedlab.parts``): collect pending CoW copies and advance ``num_computed_tokens`` (vLLM ``_update_after_schedule``).

        Each scheduled request gets its block table (``ScheduledRequest.block_ids``), final for the
        step: nothing allocates, copies or swaps between here and the forward pass.
        ``token_budget`` is what is left of ``max_num_batched_tokens`` (None: no budget, static
        batching); with ``check_postconditions`` on, the step's postconditions are checked.
        """
        out.scheduled = scheduled
        out.rejected, self._rejected = self._rejected, []
        out.add_moves("copy", self.kv_cache_manager.take_pending_copies())
        for s in out.scheduled:
            s.request.num_computed_tokens += s.num_tokens
            s.block_ids = list(self.kv_cache_manager.get_block_ids(s.request.request_id))
            self._record(
                "schedule", req=s.request.request_id, start=s.start, num_tokens=s.num_tokens, prefill=s.is_prefill
            )
        if self.check_postconditions:
            self._check_postconditions(out, token_budget)
        self.step_count += 1
        return out

    def _check_postconditions(self, out: SchedulerOutput, token_budget: int | None) -> None:
        """The constraints vLLM 0.11 asserts at the end of ``Scheduler.schedule``, and slot coverage.

        Raises:
            AssertionError: the token budget went negative or the scheduled tokens exceed
                ``max_num_batched_tokens``; more than ``max_num_seqs`` requests run; a scheduled
                request is not running, appears twice, was also preempted, or has a chunk that
                does not end at its new ``num_computed_tokens`` (within ``num_tokens``); or a
                scheduled token has no KV slot in the request's block table.
        """
        cfg, kv = self.config, self.kv_cache_manager

        def fail(msg: str) -> None:
            raise AssertionError(f"scheduler postcondition violated at step {out.step}: {msg}")

        total = out.total_num_scheduled_tokens
        if token_budget is not None and (token_budget < 0 or total > cfg.max_num_batched_tokens):
            fail(f"token budget left {token_budget}, {total} tokens > max_num_batched_tokens")
        if len(self.running) > cfg.max_num_seqs:
            fail(f"{len(self.running)} running requests > max_num_seqs={cfg.max_num_seqs}")
        ids = [s.request.request_id for s in out.scheduled]
        if len(set(ids)) != len(ids) or set(ids) & set(out.preempted):
            fail(f"scheduled {ids} repeats a request or holds one preempted ({out.preempted})")
        running = {id(r) for r in self.running}
        for s in out.scheduled:
            r, end = s.request, s.start + s.num_tokens
            if id(r) not in running or r.status != RequestStatus.RUNNING:
                fail(f"{r.request_id} is scheduled but not running")
            if s.num_tokens < 1 or end != r.num_computed_tokens or end > r.num_tokens:
                fail(
                    f"{r.request_id}: chunk [{s.start}, {end}) vs computed {r.num_computed_tokens}, "
                    f"num_tokens {r.num_tokens}"
                )
            if len(kv.get_block_ids(r.request_id)) * self.cache_config.block_size < end:
                fail(f"{r.request_id}: tokens up to {end} but only {len(kv.get_block_ids(r.request_id))} blocks")

    def update_from_output(
        self, out: SchedulerOutput, sampled: dict[str, int], now: float | None = None
    ) -> list[Request]:
        """Append sampled tokens, check stop conditions, free finished requests.

        Args:
            out: this step's ``SchedulerOutput``.
            sampled: request id -> the token sampled for it this step.
        Returns:
            Requests that finished in this step.
        """
        finished = []
        for rid, token in sampled.items():
            req = self.requests.get(rid)
            if req is None or req.is_finished():
                continue
            # A request preempted while this batch was in flight (``schedule`` ran again before this
            # update) still gets the batch's token and resumes with it, as vLLM 0.32's
            # ``update_from_output`` delivers it (``num_stale_output_tokens``); only a finished one drops it.
            req.append_output_token_ids(token)
            if now is not None:
                req.token_times.append(now)
            status = self._check_stop(req, token)
            if status is not None:
                finished += self.finish_requests(rid, status)
        return finished

    def _check_stop(self, req: Request, token: int) -> RequestStatus | None:
        """vLLM 0.32's ``check_stop`` order (``vllm/v1/core/sched/utils.py``): EOS, then stop tokens, then the
        length cap, so a last allowed token that is EOS or a stop token finishes "stop" (vLLM 0.11 checked
        the length first and said "length"; tests/twin/ checks the 0.32 order against real vLLM)."""
        sp = req.sampling_params
        if not sp.ignore_eos and req.eos_token_id is not None and token == req.eos_token_id:
            req.stop_reason = None
            return RequestStatus.FINISHED_STOPPED
        if sp.stop_token_ids is not None and token in sp.stop_token_ids:  # a list after __post_init__
            req.stop_reason = token
            return RequestStatus.FINISHED_STOPPED
        # max_tokens None: "up to max_model_len" (vLLM's meaning; the engine normally resolves it first)
        capped = req.max_tokens is not None and req.num_output_tokens >= req.max_tokens
        if capped or req.num_tokens >= self.config.max_model_len:
            return RequestStatus.FINISHED_LENGTH_CAPPED
        return None
