"""Replay results as plain data: per-request and per-step records, a summary, a text table.

The simulator (virtual clock, cost model) and the real-engine replay (wall clock) return the
same :class:`ReplayResult`, so the labs plot and compare them with the same code. All times
are seconds from the start of the replay (the first request of the slice arrives at ~0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pagedlab.sched.scheduler import Scheduler


@dataclass
class RequestRecord:
    """One finished request.

    Attributes:
        request_id: id given at submission (the trace index as a string).
        arrival_time, first_token_time, finished_time: seconds.
        prompt_len, output_len: tokens (the generated count; equals the trace's with ``ignore_eos``).
        ttft: time to first token = first_token_time - arrival_time (s).
        tpot: mean time per output token after the first (s); None with one output token.
        e2e_latency: finished_time - arrival_time (s).
        max_itl: longest gap between two consecutive tokens (s); None with one output token.
        num_preemptions: times the request was preempted (recompute or swap).
        num_cached_tokens: prompt tokens served from the prefix cache at first scheduling.
    """

    request_id: str
    arrival_time: float
    prompt_len: int
    output_len: int
    first_token_time: float
    finished_time: float
    ttft: float
    tpot: float | None
    e2e_latency: float
    max_itl: float | None
    num_preemptions: int
    num_cached_tokens: int


@dataclass
class StepRecord:
    """One engine step.

    Attributes:
        step: step number.
        start_time: clock at the start of the step (s); ``step_time`` later it ends.
        step_time: seconds (cost model, or measured wall time on the engine).
        num_seqs: sequences in the batch.
        num_scheduled_tokens: tokens computed (= prefill + decode).
        num_prefill_tokens, num_decode_tokens: the split.
        num_preempted: requests preempted while scheduling this step.
        kv_blocks_used, kv_blocks_free: after the step (cached-but-unreferenced blocks count free).
        running, waiting, swapped: queue lengths after the step.
    """

    step: int
    start_time: float
    step_time: float
    num_seqs: int
    num_scheduled_tokens: int
    num_prefill_tokens: int
    num_decode_tokens: int
    num_preempted: int
    kv_blocks_used: int
    kv_blocks_free: int
    running: int = 0
    waiting: int = 0
    swapped: int = 0


@dataclass
class ReplayResult:
    """Everything a replay produced.

    Attributes:
        requests: finished requests, in finishing order.
        steps: every step, in order.
        rejected: ``(trace_index, reason)`` of requests never submitted (too long for
            ``max_model_len`` or for the whole pool, or an empty prompt/output).
        num_gpu_blocks: size of the KV pool.
        config: free-form description (GPU, model, scheduling ...), JSON-able.
        scheduler: the scheduler that ran a simulated replay (``pagedlab.sim.simulate``), to inspect
            its pool afterwards; None for a real-engine replay. Left out of ``==`` and ``repr``.
    """

    requests: list[RequestRecord] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    rejected: list[tuple] = field(default_factory=list)
    num_gpu_blocks: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    scheduler: Scheduler | None = field(default=None, repr=False, compare=False)

    def summary(self) -> dict[str, float]:
        """Headline numbers; see :func:`summarize`."""
        return summarize(self)

    def request_rows(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.requests]

    def step_rows(self) -> list[dict[str, Any]]:
        return [asdict(s) for s in self.steps]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation (numpy's default); NaN if empty."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(result: ReplayResult) -> dict[str, float]:
    """Throughput and latency of a replay.

    Returns (seconds, tokens/s):
        num_requests, num_rejected, makespan (first arrival to last finish), output_throughput,
        total_throughput (prompt + output tokens / makespan), request_throughput, ttft_mean/p50/p99,
        tpot_p50/p99, e2e_p50/p99, max_step_time, mean_step_time, num_steps, num_preemptions,
        prefix_hit_rate (cached prompt tokens / prompt tokens), kv_usage_mean/max (fraction of pool).
    """
    reqs, steps = result.requests, result.steps
    s: dict[str, float] = {"num_requests": len(reqs), "num_rejected": len(result.rejected)}
    if not reqs:
        return s
    makespan = max(r.finished_time for r in reqs) - min(r.arrival_time for r in reqs)
    out_toks = sum(r.output_len for r in reqs)
    in_toks = sum(r.prompt_len for r in reqs)
    ttft = [r.ttft for r in reqs]
    tpot = [r.tpot for r in reqs if r.tpot is not None]
    e2e = [r.e2e_latency for r in reqs]
    s.update(
        makespan=makespan,
        output_throughput=out_toks / makespan if makespan > 0 else math.inf,
        total_throughput=(in_toks + out_toks) / makespan if makespan > 0 else math.inf,
        request_throughput=len(reqs) / makespan if makespan > 0 else math.inf,
        ttft_mean=sum(ttft) / len(ttft),
        ttft_p50=percentile(ttft, 50),
        ttft_p99=percentile(ttft, 99),
        tpot_p50=percentile(tpot, 50),
        tpot_p99=percentile(tpot, 99),
        e2e_p50=percentile(e2e, 50),
        e2e_p99=percentile(e2e, 99),
        num_preemptions=sum(r.num_preemptions for r in reqs),
        prefix_hit_rate=sum(r.num_cached_tokens for r in reqs) / in_toks if in_toks else 0.0,
    )
    if steps:
        used = [
            st.kv_blocks_used / (st.kv_blocks_used + st.kv_blocks_free)
            for st in steps
            if st.kv_blocks_used + st.kv_blocks_free
        ]
        s.update(
            num_steps=len(steps),
            max_step_time=max(st.step_time for st in steps),
            mean_step_time=sum(st.step_time for st in steps) / len(steps),
            kv_usage_mean=sum(used) / len(used) if used else 0.0,
            kv_usage_max=max(used, default=0.0),
        )
    return s


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        a = abs(v)
        if a == 0:
            return "0"
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 1:
            return f"{v:.3g}" if a < 100 else f"{v:.1f}"
        return f"{v:.3g}"
    return str(v)


def format_table(rows: Sequence[Any], columns: Sequence[str] | None = None) -> str:
    """A plain-text table (no pandas): one row per dict or dataclass, a header, right-aligned numbers.

    Args:
        rows: dicts or dataclass instances.
        columns: which keys, in order; default the first row's keys.
    Returns:
        The table as one string (no trailing newline); ``""`` for no rows.
    """
    if not rows:
        return ""
    dicts = [asdict(r) if hasattr(r, "__dataclass_fields__") else dict(r) for r in rows]
    if columns is None:
        columns = (
            list(dicts[0].keys()) if not hasattr(rows[0], "__dataclass_fields__") else [f.name for f in fields(rows[0])]
        )
    cells = [[_fmt(d.get(c)) for c in columns] for d in dicts]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    numeric = [all(isinstance(d.get(c), (int, float)) or d.get(c) is None for d in dicts) for c in columns]

    def line(vals: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

    out = [line(list(columns)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)
