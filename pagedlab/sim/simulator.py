"""Trace replay at GPU scale: the real scheduler and KV-cache manager, a roofline clock, no model.

``simulate`` runs the very ``Scheduler`` (or ``StaticScheduler``) and ``KVCacheManager`` the
engine uses, but instead of executing the model it advances a virtual clock by the cost model's
time for each step's batch (``cost_model.py``), and "samples" a dummy token for every sequence
that reached its end. Requests are ``SamplingParams(max_tokens=output_len, ignore_eos=True)``,
so each one finishes at its traced output length. Requests enter the scheduler when the clock
passes their arrival time; when nothing is left to run the clock jumps to the next arrival.

A step's time is the roofline of its batch (``(context, new tokens)`` per sequence) plus the
PCIe time of any blocks swapped out or in (vLLM v0 moved them before running the model) and
the HBM time of copy-on-write block copies. The pool size for a GPU follows vLLM:
``(memory x gpu_memory_utilization - weights) / (block_size x kv_bytes_per_token)``
(``cost_model.num_gpu_blocks``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.errors import ConfigError
from pagedlab.request import Request
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import Scheduler, SchedulerOutput
from pagedlab.sched.static import StaticScheduler
from pagedlab.sim.cost_model import CostModel, num_gpu_blocks
from pagedlab.sim.hardware import H100, GPUSpec
from pagedlab.sim.metrics import ReplayResult, RequestRecord, StepRecord, format_table, summarize
from pagedlab.sim.models import LLAMA_2_7B, ModelSpec
from pagedlab.sim.traces import TraceRequest, synthesize_prompts

__all__ = ["simulate", "gpu_cache_config", "format_table", "summarize", "make_records"]

#: vLLM v0's default ``swap_space`` per GPU, used when swap preemption needs a CPU pool.
DEFAULT_SWAP_SPACE_BYTES = 4 << 30


def gpu_cache_config(
    model: ModelSpec,
    hardware: GPUSpec,
    block_size: int = 16,
    gpu_memory_utilization: float = 0.9,
    enable_prefix_caching: bool = False,
    swap_space_bytes: int = DEFAULT_SWAP_SPACE_BYTES,
    **kw: Any,
) -> CacheConfig:
    """A ``CacheConfig`` sized for ``model`` on ``hardware`` (blocks from memory, CPU blocks from swap space)."""
    gpu = num_gpu_blocks(model, hardware, block_size, gpu_memory_utilization)
    cpu = int(swap_space_bytes * hardware.num_gpus // (block_size * model.kv_bytes_per_token))
    return CacheConfig(
        block_size=block_size, num_gpu_blocks=gpu, num_cpu_blocks=cpu, enable_prefix_caching=enable_prefix_caching, **kw
    )


def _rejection(r: TraceRequest, sc: SchedulerConfig, cc: CacheConfig) -> str | None:
    if r.prompt_len < 1 or r.output_len < 1:
        return f"empty prompt or output ({r.prompt_len} + {r.output_len} tokens)"
    total = r.prompt_len + r.output_len
    if total > sc.max_model_len:
        return f"{total} tokens exceed max_model_len={sc.max_model_len}"
    need = -(-total // cc.block_size)
    if need > cc.num_gpu_blocks:
        return f"needs {need} blocks, the whole pool has {cc.num_gpu_blocks}"
    # the threshold does not cut a lone request's prompt (vLLM 0.32), so it cannot make a prompt fit
    if not sc.enable_chunked_prefill and r.prompt_len > sc.max_num_batched_tokens:
        return f"{r.prompt_len}-token prompt exceeds max_num_batched_tokens={sc.max_num_batched_tokens} (no chunking)"
    return None


def make_records(req: Request, t0: float = 0.0) -> RequestRecord:
    """A ``RequestRecord`` from a finished ``Request`` (times shifted by ``-t0``)."""
    times = [t - t0 for t in req.token_times]
    arrival = req.arrival_time - t0
    gaps = [b - a for a, b in zip(times, times[1:])]
    return RequestRecord(
        request_id=req.request_id,
        arrival_time=arrival,
        prompt_len=req.num_prompt_tokens,
        output_len=req.num_output_tokens,
        first_token_time=times[0],
        finished_time=times[-1],
        ttft=times[0] - arrival,
        tpot=(times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None,
        e2e_latency=times[-1] - arrival,
        max_itl=max(gaps) if gaps else None,
        num_preemptions=req.num_preemptions,
        num_cached_tokens=max(req.num_cached_tokens, 0),
    )


@dataclass
class _Sim:
    """One replay in progress: the trace, the scheduler and pool it drives, and the virtual clock (s)."""

    requests: Sequence[TraceRequest]
    prompts: Sequence[Sequence[int]] | None
    sched: Scheduler
    kv: KVCacheManager
    cc: CacheConfig
    cost: CostModel
    result: ReplayResult
    pending: deque[int] = field(default_factory=deque)
    t0: float = 0.0
    clock: float = 0.0
    idle_steps: int = 0

    def next_arrival(self) -> float:
        """Arrival of the next pending request, on the replay clock."""
        return self.requests[self.pending[0]].arrival_time - self.t0

    def admit_arrivals(self) -> None:
        """Submit every pending request that has arrived by ``clock``."""
        while self.pending and self.next_arrival() <= self.clock:
            i = self.pending.popleft()
            tr = self.requests[i]
            ids = list(self.prompts[i]) if self.prompts is not None else [0] * tr.prompt_len
            self.sched.add_request(
                Request(
                    str(i),
                    ids,
                    SamplingParams(max_tokens=tr.output_len, ignore_eos=True),
                    arrival_time=tr.arrival_time - self.t0,
                    block_hasher=self.kv.block_hasher,
                )
            )

    def step_time(self, out: SchedulerOutput) -> float:
        """Seconds of one step: the batch's roofline, plus swap traffic over PCIe and CoW copies in HBM."""
        block_bytes = self.cc.block_size * self.cost.model.kv_bytes_per_token
        dt = self.cost.step_time((s.start, s.num_tokens) for s in out.scheduled)
        dt += (len(out.blocks_to_swap_out) + len(out.blocks_to_swap_in)) * block_bytes / self.cost.gpu.pcie_bandwidth
        return dt + len(out.blocks_to_copy) * 2 * block_bytes / self.cost.bytes_per_s

    def run_step(self, out: SchedulerOutput, dt: float) -> list[Request]:
        """Advance the clock by ``dt``, "sample" for every sequence that reached its end, record the step.

        Returns:
            the requests that finished in this step.
        """
        start, self.clock = self.clock, self.clock + dt
        sampled: dict[str, int] = {}
        num_prefill = 0
        for s in out.scheduled:
            req = s.request
            if req.first_scheduled_time is None:
                req.first_scheduled_time = start
            if s.is_prefill:
                num_prefill += s.num_tokens
            if s.samples:
                sampled[req.request_id] = int(req.request_id) % self.cost.model.vocab_size
                if req.first_token_time is None:
                    req.first_token_time = self.clock
        finished = self.sched.update_from_output(out, sampled, now=self.clock)
        self.result.rejected += [
            (int(r.request_id), "outgrew max_num_batched_tokens after preemption (no chunking)") for r in out.rejected
        ]
        for req in finished:
            req.finished_time = self.clock
            self.result.requests.append(make_records(req))
        total, kv, sched = out.total_num_scheduled_tokens, self.kv, self.sched
        self.result.steps.append(
            StepRecord(
                step=out.step,
                start_time=start,
                step_time=dt,
                num_seqs=len(out.scheduled),
                num_scheduled_tokens=total,
                num_prefill_tokens=num_prefill,
                num_decode_tokens=total - num_prefill,
                num_preempted=len(out.preempted),
                kv_blocks_used=self.cc.num_gpu_blocks - kv.num_free_blocks,
                kv_blocks_free=kv.num_free_blocks,
                running=len(sched.running),
                waiting=len(sched.waiting),
                swapped=len(sched.swapped),
            )
        )
        return finished

    def schedule(self) -> SchedulerOutput | None:
        """The next step to run, or None when the clock only had to move (idle, or waiting for arrivals).

        Raises:
            RuntimeError: the scheduler stalls (nothing scheduled while work is pending).
        """
        if not self.sched.has_unfinished_requests():
            self.clock = self.next_arrival()  # idle: jump to the next arrival
            return None
        out = self.sched.schedule()
        moved = out.scheduled or out.preempted or out.blocks_to_swap_in or out.blocks_to_swap_out
        if not moved and self.pending:
            self.clock = max(self.clock, self.next_arrival())  # wait for more work
            return None
        # A step may only preempt (the next one re-admits); a long run of such steps is a livelock.
        self.idle_steps = 0 if out.scheduled else self.idle_steps + 1
        if self.idle_steps > 1000 or not moved:
            raise RuntimeError(
                f"scheduler stalled at step {out.step}: {self.sched.get_num_unfinished_requests()} "
                "requests unfinished, none scheduled"
            )
        return out


def _check_trace(requests: Sequence[TraceRequest], scheduling: str) -> None:
    if scheduling not in ("continuous", "static"):
        raise ConfigError(f"scheduling must be 'continuous' or 'static', got {scheduling!r}")
    for k in range(1, len(requests)):
        if requests[k].arrival_time < requests[k - 1].arrival_time:
            raise ValueError(
                f"requests must be in arrival order: #{k} arrives at {requests[k].arrival_time} s, "
                f"before #{k - 1} at {requests[k - 1].arrival_time} s"
            )


def _configs(
    requests: Sequence[TraceRequest],
    scheduler_config: SchedulerConfig | None,
    cache_config: CacheConfig | None,
    model: ModelSpec,
    hardware: GPUSpec,
    preemption_mode: str | None,
) -> tuple[SchedulerConfig, CacheConfig]:
    """The scheduler and cache configs ``simulate`` runs with (its defaults filled in)."""
    if scheduler_config is None:
        longest = max((r.prompt_len + r.output_len for r in requests), default=1)
        scheduler_config = SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192, max_model_len=max(1, longest))
    if preemption_mode is not None:
        # A str from the caller: SchedulerConfig.__post_init__ checks it is "recompute" or "swap".
        scheduler_config = dataclasses.replace(scheduler_config, preemption_mode=preemption_mode)  # type: ignore[arg-type]
    cc = cache_config or gpu_cache_config(model, hardware)
    if scheduler_config.preemption_mode == "swap" and cc.num_cpu_blocks == 0:
        raise ConfigError("preemption_mode='swap' needs cache_config.num_cpu_blocks > 0 (the swap space)")
    return scheduler_config, cc


def _start(
    requests: Sequence[TraceRequest],
    sc: SchedulerConfig,
    cc: CacheConfig,
    cost: CostModel,
    scheduling: str,
    prompts: Sequence[Sequence[int]] | None,
    seed: int,
) -> _Sim:
    """A fresh pool and scheduler, the result's config, and the requests split into pending / rejected."""
    kv = KVCacheManager.from_config(cc, sc, default_hash_seed=seed)
    sched = (StaticScheduler if scheduling == "static" else Scheduler)(sc, cc, kv)
    if prompts is None and cc.enable_prefix_caching:
        prompts = synthesize_prompts(requests, cost.model.vocab_size, seed)
    result = ReplayResult(
        scheduler=sched,
        num_gpu_blocks=cc.num_gpu_blocks,
        config=dict(
            mode="sim",
            model=cost.model.name,
            gpu=cost.gpu.name,
            scheduling=scheduling,
            block_size=cc.block_size,
            num_gpu_blocks=cc.num_gpu_blocks,
            num_cpu_blocks=cc.num_cpu_blocks,
            enable_prefix_caching=cc.enable_prefix_caching,
            **dataclasses.asdict(sc),
        ),
    )
    sim = _Sim(requests, prompts, sched, kv, cc, cost, result, t0=requests[0].arrival_time if len(requests) else 0.0)
    for i, r in enumerate(requests):
        why = _rejection(r, sc, cc)
        if why is None:
            sim.pending.append(i)
        else:
            result.rejected.append((i, why))
    return sim


def simulate(
    requests: Sequence[TraceRequest],
    scheduler_config: SchedulerConfig | None = None,
    cache_config: CacheConfig | None = None,
    model: ModelSpec = LLAMA_2_7B,
    hardware: GPUSpec = H100,
    scheduling: str = "continuous",
    preemption_mode: str | None = None,
    cost_model: CostModel | None = None,
    prompts: Sequence[Sequence[int]] | None = None,
    seed: int = 0,
    progress: bool = False,
    max_steps: int | None = None,
) -> ReplayResult:
    """Replay a trace through the real scheduler with a cost-model clock.

    Args:
        requests: the trace, in arrival order (seconds; the clock starts at the first arrival).
        scheduler_config: limits and policy; default vLLM's ``LLM`` defaults (``max_num_seqs=256``,
            ``max_num_batched_tokens=8192``) with ``max_model_len`` = the longest request.
        cache_config: the pool; default :func:`gpu_cache_config` for ``model`` on ``hardware``.
        model, hardware: what the cost model prices (``pagedlab.sim.models`` / ``hardware``).
        scheduling: ``"continuous"`` (``Scheduler``) or ``"static"`` (``StaticScheduler``).
        preemption_mode: overrides ``scheduler_config.preemption_mode`` (``"recompute"`` | ``"swap"``).
        cost_model: default ``CostModel(model, hardware)`` (pure roofline, no overhead).
        prompts: token ids per request; default synthesised (:func:`synthesize_prompts`) when
            prefix caching is on, else zeros (content does not matter without caching).
        seed: seed of the synthesised prompts.
        progress: show a tqdm bar over finished requests.
        max_steps: stop after this many steps (a guard for experiments); None = run to the end.
    Returns:
        A ``ReplayResult`` whose ``scheduler`` is the scheduler that ran it (to inspect the pool
        afterwards). Requests that can never
        run (longer than ``max_model_len`` or than the whole pool, empty) are listed in
        ``rejected`` and not submitted.
    Raises:
        ConfigError: unknown ``scheduling``; swap preemption without CPU blocks.
        ValueError: ``requests`` are not sorted by arrival time.
        RuntimeError: the scheduler stalls (nothing scheduled while work is pending) - a bug.
    """
    _check_trace(requests, scheduling)
    sc, cc = _configs(requests, scheduler_config, cache_config, model, hardware, preemption_mode)
    sim = _start(requests, sc, cc, cost_model or CostModel(model, hardware), scheduling, prompts, seed)
    bar = None
    if progress:
        from tqdm.auto import tqdm  # lazy: start-up time (tqdm.auto imports ipywidgets in a notebook)

        bar = tqdm(total=len(sim.pending), unit="req", desc=f"sim {scheduling}")
    while sim.pending or sim.sched.has_unfinished_requests():
        if max_steps is not None and len(sim.result.steps) >= max_steps:
            break
        sim.admit_arrivals()
        out = sim.schedule()
        if out is None:
            continue
        finished = sim.run_step(out, sim.step_time(out))
        if bar is not None and finished:
            bar.update(len(finished))
    if bar is not None:
        bar.close()
    return sim.result


def compare(results: dict, columns: list[str] | None = None) -> str:
    """A table of ``summarize`` for several named results, e.g. ``{"static": r1, "continuous": r2}``."""
    columns = columns or [
        "name",
        "num_requests",
        "makespan",
        "output_throughput",
        "ttft_p50",
        "ttft_p99",
        "tpot_p50",
        "tpot_p99",
        "max_step_time",
        "num_preemptions",
    ]
    rows = [{"name": name, **summarize(r)} for name, r in results.items()]
    return format_table(rows, columns)
