"""Static batching: the baseline continuous batching replaces.

A batch is formed only when the previous one has completely finished; a request that
finishes early leaves its seat empty until the longest member is done (FasterTransformer
style, the "request-level" scheduling of the Orca paper). Convention: a new batch is admitted
in the step right after the last member finished. Prompts are prefilled whole (no chunking,
no token budget), then the batch decodes together. A member preempted for recompute waits at
the head of the queue and rejoins with the next batch; a swapped member is swapped back in
while its batch still runs.
"""

from __future__ import annotations

from pagedlab.sched.scheduler import Scheduler, SchedulerOutput


class StaticScheduler(Scheduler):
    """Same interface as ``Scheduler``; admits a new batch only when ``running`` is empty."""

    def _admits_waiting(self) -> bool:
        return False  # the running batch is closed to newcomers

    def schedule(self) -> SchedulerOutput:
        if self.running or self.swapped:
            # Decode the batch (re-prefilling preempted members, swapping members back in).
            return super().schedule()
        out = SchedulerOutput(step=self.step_count)
        if self.tracer is not None:
            self.tracer.step = self.step_count
        batch = []
        while len(self.waiting) and self._has_seats_for(self.waiting.peek_request()):
            s = self._try_admit(self.waiting.peek_request(), budget=None)
            if s is None:
                break
            batch.append(s)
        return self.finish_schedule(out, batch, None)
