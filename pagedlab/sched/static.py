"""Static batching: the baseline continuous batching replaces.

A batch is formed only when the previous one has completely finished; a request that
finishes early leaves its seat empty until the longest member is done (FasterTransformer
style, the "request-level" scheduling of the Orca paper). Convention: a new batch is admitted
in the step right after the last member finished. Prompts are prefilled whole (no chunking,
no token budget), then the batch decodes together.
"""
from __future__ import annotations

from pagedlab.sched.scheduler import Scheduler, SchedulerOutput, ScheduledRequest
from pagedlab.sched.request import RequestStatus


class StaticScheduler(Scheduler):
    """Same interface as ``Scheduler``; admits a new batch only when ``running`` is empty."""

    def _admits_waiting(self) -> bool:
        return False                              # the running batch is closed to newcomers

    def schedule(self) -> SchedulerOutput:
        if self.running or self.swapped:
            # Decode the batch (re-prefilling preempted members, swapping members back in).
            return super().schedule()
        out = SchedulerOutput(step=self.step_count)
        if self.tracer is not None:
            self.tracer.step = self.step_count
        kv = self.kv_cache_manager
        while len(self.waiting) and len(self.running) < self.config.max_num_seqs:
            req = self.waiting.peek_request()
            hit_blocks, num_hit = kv.get_computed_blocks(req) if req.num_computed_tokens == 0 else ([], 0)
            n = req.num_tokens - num_hit
            if kv.allocate_slots(req, n, num_hit, hit_blocks) is None:
                break
            self.waiting.pop_request()
            req.status = RequestStatus.RUNNING
            req.num_computed_tokens = num_hit
            if req.num_cached_tokens < 0:
                req.num_cached_tokens = num_hit
            self.running.append(req)
            out.scheduled.append(ScheduledRequest(req, num_hit, n))
        out.add_moves("copy", kv.take_pending_copies())
        for s in out.scheduled:
            s.request.num_computed_tokens += s.num_tokens
            self._record("schedule", req=s.request.request_id, start=s.start, num_tokens=s.num_tokens, prefill=True)
        self.step_count += 1
        return out
