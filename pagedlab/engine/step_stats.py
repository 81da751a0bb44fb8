"""``StepStats``: what one engine step did, as plain data for tables, plots and widgets (the kit's
per-step record; vLLM 0.32.0 reports the like as ``SchedulerStats`` and ``IterationStats``,
``vllm/v1/metrics/stats.py``). ``LLMEngine.step_stats`` keeps the most recent ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagedlab.core.kv_cache_manager import KVCacheManager
    from pagedlab.sched.scheduler import Scheduler, SchedulerOutput


@dataclass
class StepStats:
    """What one step did (plain data, for tables, plots and widgets).

    Queue fields are taken after the step (finished requests gone, fork children included);
    ``waiting``/``running``/``swapped`` are their lengths. ``prefix_cache_hits`` and
    ``prefix_cache_queries`` are the tokens hit and looked up by the requests admitted in this
    step, counted once per admission as vLLM's ``PrefixCacheStats`` (first admissions only;
    re-admissions after preemption are left out, as vLLM keeps them apart).
    """

    step: int
    scheduled: list[tuple[str, int, bool]]  # (request_id, num_tokens, is_prefill)
    num_prefill_tokens: int
    num_decode_tokens: int
    preempted: list[str]
    kv_blocks_used: int
    kv_blocks_free: int
    step_time: float  # seconds, whole step
    sched_time: float = 0.0  # seconds in scheduler + KV-cache manager (schedule + update)
    running: int = 0
    waiting: int = 0
    swapped: int = 0
    waiting_ids: list[str] = field(default_factory=list)  # queue order (head first)
    running_ids: list[str] = field(default_factory=list)
    swapped_ids: list[str] = field(default_factory=list)
    prefix_cache_hits: int = 0  # tokens
    prefix_cache_queries: int = 0  # tokens

    def queues(self) -> dict[str, object]:
        """``{"step", "waiting", "running", "swapped", "preempted"}`` with request-id lists, the
        per-step history ``pagedlab.viz.render_queues`` draws as request chips."""
        return {
            "step": self.step,
            "waiting": list(self.waiting_ids),
            "running": list(self.running_ids),
            "swapped": list(self.swapped_ids),
            "preempted": list(self.preempted),
        }


def make_step_stats(
    out: SchedulerOutput, scheduler: Scheduler, kv: KVCacheManager, num_gpu_blocks: int, t0: float, t_sched: float
) -> StepStats:
    """The ``StepStats`` of the step that scheduled ``out`` (started at ``t0``, ``t_sched`` seconds in the
    scheduler); takes (and resets) the manager's prefix-cache stats."""
    cache = kv.make_prefix_cache_stats()
    return StepStats(
        step=out.step,
        scheduled=[(s.request.request_id, s.num_tokens, s.is_prefill) for s in out.scheduled],
        num_prefill_tokens=sum(s.num_tokens for s in out.scheduled if s.is_prefill),
        num_decode_tokens=sum(s.num_tokens for s in out.scheduled if not s.is_prefill),
        preempted=list(out.preempted),
        kv_blocks_used=num_gpu_blocks - kv.num_free_blocks,
        kv_blocks_free=kv.num_free_blocks,
        step_time=time.perf_counter() - t0,
        sched_time=t_sched,
        running=len(scheduler.running),
        waiting=len(scheduler.waiting),
        swapped=len(scheduler.swapped),
        waiting_ids=[r.request_id for r in scheduler.waiting],
        running_ids=[r.request_id for r in scheduler.running],
        swapped_ids=[r.request_id for r in scheduler.swapped],
        prefix_cache_hits=cache.hits,
        prefix_cache_queries=cache.queries,
    )
