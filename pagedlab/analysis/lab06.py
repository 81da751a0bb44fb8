"""Lab 06 (preemption: recompute vs swap) helpers.

* :func:`pressure_player` - one animated player per engine run: the scheduler's queues (waiting /
  running / swapped, by request id) above the block pool (GPU blocks by owner, and the CPU swap
  space when anything is swapped out), one frame per engine step.
* :func:`swap_traffic` - how many KV blocks a run moved to the CPU and back (from the event trace).
* :func:`swap_time_with_copies` - the swap cost when every block of every layer is its own copy,
  as in vLLM v0 (``swap_blocks`` issues one ``cudaMemcpyAsync`` per block, per layer, for K and
  for V), so small blocks pay a fixed per-copy cost many times.
* :func:`cpu_speeds` - this machine's memory-copy bandwidth and matmul FLOP/s, measured in well
  under a second, to place the CPU engine on the same swap/recompute scale as the GPUs.
* :func:`thrashing_curve` - preemptions and the prefill work they redo as the KV pool shrinks.
* :func:`watermark_curve` - the same counts on one pool as the scheduler's KV watermark
  (vLLM 0.32.0's ``SchedulerConfig.watermark``) rises.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.sim import simulate, summarize
from pagedlab.trace import rebuild_snapshots
from pagedlab.viz import render_block_pool, render_queues

__all__ = [
    "pressure_player",
    "swap_traffic",
    "swap_time_with_copies",
    "cpu_speeds",
    "thrashing_curve",
    "watermark_curve",
]


def _snapshot_per_step(events: list[dict[str, Any]], steps: list[int]) -> list[dict[str, Any]]:
    snaps = rebuild_snapshots(list(events), per="step")
    out, k = [], -1
    for s in steps:
        while k + 1 < len(snaps) and snaps[k + 1]["step"] <= s:
            k += 1
        snap = dict(snaps[max(k, 0)])
        snap["step"] = s
        if k < 0 or snaps[k]["step"] != s:
            snap["events"] = []  # nothing happened to the pool in this step
        out.append(snap)
    return out


def pressure_player(run: Any, title: str = "", interval: int = 400):
    """Queues and block pool of an engine run (``pagedlab.analysis.lab04.Run`` with ``trace=True``)."""
    from pagedlab.viz import Player  # lazy: start-up time (Player imports ipywidgets)

    hist = run.queues
    if run.engine.tracer is None:
        raise ValueError("the engine ran without trace=True: there is no block history to draw")
    snaps = _snapshot_per_step(run.engine.tracer.events, [h["step"] for h in hist])
    stats = run.step_stats

    def render(i: int) -> str:
        q = render_queues(hist, i, title=f"{title} - scheduler queues" if title else None)
        p = render_block_pool(
            snaps[i], title=f"{title} - GPU block pool after step {hist[i]['step']}" if title else None
        )
        return f'<div>{q}</div><div style="margin-top:6px">{p}</div>'

    def caption(i: int, k: int) -> str:
        s = stats[i]
        sched = ", ".join(f"{r} {'prefill ' + str(n) if p else 'decode'}" for r, n, p in s.scheduled) or "nothing"
        pre = f"  ·  PREEMPTED {', '.join(s.preempted)}" if s.preempted else ""
        return f"step {s.step}: ran {sched}{pre}"

    return Player(list(range(len(hist))), render=render, caption=caption, interval=interval, description="frame")


def swap_traffic(events: list[dict[str, Any]]) -> dict[str, int]:
    """``{"swap_out": blocks GPU->CPU, "swap_in": blocks CPU->GPU, "preempt_swap", "preempt_recompute"}``."""
    out = {"swap_out": 0, "swap_in": 0, "preempt_swap": 0, "preempt_recompute": 0}
    for e in events:
        if e["kind"] in ("swap_out", "swap_in"):
            out[e["kind"]] += len(e.get("mapping", ()))
        elif e["kind"] == "preempt":
            out["preempt_" + e.get("mode", "recompute")] += 1
    return out


def swap_time_with_copies(model: Any, gpu: Any, num_tokens: int, block_size: int, per_copy_s: float) -> float:
    """Seconds to swap ``num_tokens`` of KV out and back in, one copy per block per layer per K/V.

    ``2 directions x (copies x per_copy_s + bytes / PCIe)``, with ``copies = ceil(T / block_size)
    x layers x 2`` and ``bytes = T x kv_bytes_per_token``. With ``per_copy_s = 0`` this is
    ``CostModel.swap_time``.
    """
    copies = math.ceil(num_tokens / block_size) * model.num_layers * 2
    one_way = copies * per_copy_s + num_tokens * model.kv_bytes_per_token / gpu.pcie_bandwidth
    return 2 * one_way


def cpu_speeds(copy_mb: int = 64, matmul_n: int = 768, repeats: int = 3) -> dict[str, float]:
    """This CPU's memory-copy bandwidth (bytes/s) and fp32 matmul rate (FLOP/s), best of ``repeats``.

    The engine's swap on a CPU is a copy between two tensors in RAM; its recompute is a forward
    pass, mostly matrix multiplications. Uses torch's current thread count.
    """
    import torch  # lazy: start-up time (torch takes seconds to import)

    n = copy_mb * (1 << 20) // 4
    src, dst = torch.ones(n), torch.empty(n)
    a, b = torch.randn(matmul_n, matmul_n), torch.randn(matmul_n, matmul_n)
    best_copy = best_mm = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        dst.copy_(src)
        best_copy = min(best_copy, time.perf_counter() - t)
        t = time.perf_counter()
        torch.mm(a, b)
        best_mm = min(best_mm, time.perf_counter() - t)
    return {"copy_bytes_per_s": 4 * n / best_copy, "flops_per_s": 2 * matmul_n**3 / best_mm}


def thrashing_curve(
    requests: Any, pool_sizes: Any, model: Any, hardware: Any, block_size: int = 16
) -> list[dict[str, float]]:
    """Preemptions per finished request, and the prefill work they waste, as the KV pool shrinks.

    Replays ``requests`` (``pagedlab.sim.TraceRequest``, arrival order) through the real
    scheduler and KV-cache manager on the simulator's clock, once per pool size (recompute
    preemption, as vLLM v1).

    Returns:
        One dict per pool size, in the order given: ``num_gpu_blocks``, ``preemptions``,
        ``finished``, ``preemptions_per_finished``, ``recomputed_tokens`` (prefill tokens computed
        beyond the prompts: the work preemption threw away and redid), ``recomputed_frac`` (the
        same over the prompt tokens),
        ``makespan_s``, ``steps`` (engine steps), ``output_throughput`` (generated tokens per
        simulated second) and ``mean_batch`` (requests per step).

    Raises:
        ValueError: a pool that cannot hold the longest request, or no requests.
    """
    reqs = _pressure_requests(requests, "thrashing_curve")
    out: list[dict[str, float]] = []
    for n in pool_sizes:
        _check_pool(reqs, n, block_size)
        res = simulate(
            reqs, cache_config=CacheConfig(block_size=block_size, num_gpu_blocks=n), model=model, hardware=hardware
        )
        out.append({"num_gpu_blocks": n, **_pressure_counts(res)})
    return out


def watermark_curve(
    requests: Any, watermarks: Any, num_gpu_blocks: int, model: Any, hardware: Any, block_size: int = 16
) -> list[dict[str, float]]:
    """Preemptions, the prefill work they redo, and the time to serve ``requests``, per KV watermark.

    Replays ``requests`` (``pagedlab.sim.TraceRequest``, arrival order) through the real
    scheduler and KV-cache manager on the simulator's clock, on one pool of ``num_gpu_blocks``
    blocks (recompute preemption, as vLLM v1), once per ``SchedulerConfig.watermark``: vLLM
    0.32.0's rule, applied by ``Scheduler._watermark_blocks`` - a waiting or preempted request is
    admitted only if ``int(watermark * num_blocks)`` blocks stay free beyond its own, counting
    vLLM's null block (``num_gpu_blocks + 1``), and only while some request is running.

    Returns:
        One dict per watermark, in the order given: ``watermark``, ``watermark_blocks`` (the blocks
        held back), ``num_gpu_blocks`` and the counts of :func:`thrashing_curve` (``preemptions``,
        ``finished``, ``preemptions_per_finished``, ``recomputed_tokens``, ``recomputed_frac``,
        ``makespan_s``, ``steps``, ``output_throughput``, ``mean_batch``).

    Raises:
        ValueError: no requests, no watermarks, a watermark outside ``[0, 1)`` (from
            ``SchedulerConfig``), or a pool that cannot hold the longest request.
    """
    reqs = _pressure_requests(requests, "watermark_curve")
    ws = list(watermarks)
    if not ws:
        raise ValueError("watermark_curve needs at least one watermark")
    _check_pool(reqs, num_gpu_blocks, block_size)
    longest = max(r.prompt_len + r.output_len for r in reqs)
    cache = CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks)
    out: list[dict[str, float]] = []
    for w in ws:
        # simulate's own defaults (vLLM's LLM: 256 sequences, 8192 tokens a step), plus the watermark
        sc = SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192, max_model_len=longest, watermark=w)
        res = simulate(reqs, scheduler_config=sc, cache_config=cache, model=model, hardware=hardware)
        out.append(
            {
                "watermark": w,
                "watermark_blocks": int(w * (num_gpu_blocks + 1)),
                "num_gpu_blocks": num_gpu_blocks,
                **_pressure_counts(res),
            }
        )
    return out


def _pressure_requests(requests: Any, who: str) -> list[Any]:
    reqs = list(requests)
    if not reqs:
        raise ValueError(f"{who} needs at least one request")
    return reqs


def _check_pool(reqs: list[Any], num_gpu_blocks: int, block_size: int) -> None:
    longest = max(-(-(r.prompt_len + r.output_len) // block_size) for r in reqs)
    if num_gpu_blocks < longest:
        raise ValueError(f"a pool of {num_gpu_blocks} blocks cannot hold the longest request ({longest} blocks)")


def _pressure_counts(res: Any) -> dict[str, float]:
    """What a replay under memory pressure cost: preemptions and the prefill they redid, time, batch."""
    summary = summarize(res)
    prompts = sum(r.prompt_len for r in res.requests)
    prefill = sum(s.num_prefill_tokens for s in res.steps)
    return {
        "preemptions": summary["num_preemptions"],
        "finished": len(res.requests),
        "preemptions_per_finished": summary["num_preemptions"] / len(res.requests),
        "recomputed_tokens": prefill - prompts,
        "recomputed_frac": (prefill - prompts) / prompts,
        "makespan_s": summary["makespan"],
        "steps": summary["num_steps"],
        "output_throughput": summary["output_throughput"],
        "mean_batch": sum(s.num_seqs for s in res.steps) / len(res.steps),
    }
