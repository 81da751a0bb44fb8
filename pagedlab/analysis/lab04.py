"""Lab 04 (continuous batching) helpers; labs 05 and 06 reuse them.

* :func:`toy_serve` - the engine's part of the loop around a scheduling function (the learner's
  ``schedule_step`` or ``static_step``): advance ``num_computed_tokens``, "sample" a token when a
  request's chunk reaches its end, free finished requests. No model: a step is one call.
* :func:`run_requests` - drive a real ``LLMEngine`` step by step (requests may arrive at a later
  step), and keep what the labs plot: outputs, per-step stats, the queues by request id, timings.
* :func:`side_by_side` - one animated player showing two runs' batch Gantt charts, frame ``i``
  drawing step ``i`` of both, so the two schedules race each other.

Nothing here calls the learner's code unless it is passed in explicitly.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagedlab import data
from pagedlab.analysis.contiguous import replay_contiguous, replay_paged
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.i18n.messages import tr_lines
from pagedlab.request import Request
from pagedlab.sampling_params import SamplingParams
from pagedlab.viz import batch_steps, empty_step, render_batch_gantt

__all__ = [
    "load_prompts",
    "chat_ids",
    "toy_serve",
    "slot_utilization",
    "Run",
    "run_requests",
    "side_by_side",
    "static_step",
    "batch_under_reservation",
    "latency_anatomy",
    "explain_latency",
]


def load_prompts(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """A prompts file (default: the kit's ``data/prompts.jsonl``) as ``{id: {"id", "messages", "max_tokens"}}``
    in file order. Raises ``DataFileNotFoundError`` if the kit's file is missing."""
    if path is None:
        path = data.path("prompts.jsonl")
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return {r["id"]: r for r in rows}


def chat_ids(tokenizer: Any, messages: Sequence[dict[str, str]]) -> list[int]:
    """Token ids of a conversation under the model's chat template (as ``LLM.chat`` builds them)."""
    out = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


# --- the toy loop (no model) ------------------------------------------------------------------
def static_step(
    running: list[Request], waiting: deque[Request], kv_cache_manager: KVCacheManager, max_num_seqs: int
) -> dict[str, int]:
    """Request-level (static) batching, the baseline: a new batch only when the last one is done.

    While any request of the batch runs, its members get their missing tokens and nobody joins.
    When ``running`` is empty, waiting requests form the next batch first come first served, up to
    ``max_num_seqs`` and while ``allocate_slots`` finds room (the head of the queue is never
    overtaken). Same arguments and result as the lab's ``schedule_step`` (``{request_id: tokens}``);
    admitted requests move from the front of ``waiting`` to the end of ``running``.
    """
    admit = not running
    scheduled: dict[str, int] = {}
    for req in running:
        n = req.num_tokens - req.num_computed_tokens
        if n > 0:
            kv_cache_manager.allocate_slots(req, n)
            scheduled[req.request_id] = n
    while admit and waiting and len(running) < max_num_seqs:
        head = waiting[0]
        n = head.num_tokens - head.num_computed_tokens
        if kv_cache_manager.allocate_slots(head, n) is None:
            break
        running.append(waiting.popleft())
        scheduled[head.request_id] = n
    return scheduled


def toy_serve(
    step_fn: Callable[[list, deque, Any], dict[str, int]],
    workload: Sequence[tuple[int, str, int, int]],
    *,
    num_gpu_blocks: int = 64,
    block_size: int = 4,
    max_steps: int = 400,
) -> list[dict[str, Any]]:
    """Run a scheduling function as the engine would, without a model.

    Args:
        step_fn: ``step_fn(running, waiting, kv_cache_manager) -> {request_id: tokens}`` (bind
            the other arguments with a lambda).
        workload: ``(arrival_step, request_id, prompt_len, max_tokens)`` tuples.
        num_gpu_blocks, block_size: the KV pool.
        max_steps: stop there (a guard against a scheduler that never finishes).
    Returns:
        One dict per step, ``{"step", "scheduled": [(id, tokens, is_prefill)], "running", "waiting",
        "finished"}``, the format ``pagedlab.viz.render_batch_gantt`` draws.
    """
    kv = KVCacheManager(block_size, num_gpu_blocks, max_model_len=4096)
    pending = sorted(workload)
    running: list[Any] = []
    waiting: deque = deque()
    steps: list[dict[str, Any]] = []
    for step in range(max_steps):
        while pending and pending[0][0] <= step:
            _, rid, plen, out = pending.pop(0)
            waiting.append(
                Request(
                    rid,
                    [(11 * i + 3) % 97 for i in range(plen)],
                    SamplingParams(max_tokens=out, ignore_eos=True),
                    arrival_time=float(step),
                )
            )
        if not (pending or running or waiting):
            break
        before = {r.request_id: r.num_computed_tokens < r.num_prompt_tokens for r in [*running, *waiting]}
        scheduled = step_fn(running, waiting, kv) or {}
        entries, finished = [], []
        for req in list(running):
            n = scheduled.get(req.request_id, 0)
            if n <= 0:
                continue
            entries.append((req.request_id, n, before.get(req.request_id, n > 1)))
            req.num_computed_tokens += n
            if req.num_computed_tokens == req.num_tokens:  # the chunk reached the end: sample
                req.append_output_token_ids(1)
                if req.num_output_tokens >= req.max_tokens:
                    kv.free(req)
                    running.remove(req)
                    finished.append(req.request_id)
        steps.append(
            {
                "step": step,
                "scheduled": entries,
                "finished": finished,
                "preempted": [],
                "running": len(running),
                "waiting": len(waiting),
                "swapped": 0,
            }
        )
    return steps


def slot_utilization(steps: Sequence[dict[str, Any]], max_num_seqs: int) -> float:
    """Busy batch slots / (steps x max_num_seqs): how full the batch was on average."""
    busy = sum(len(s["scheduled"]) for s in steps)
    return busy / (len(steps) * max_num_seqs) if steps else 0.0


# --- the real engine, step by step ---------------------------------------------------------------
@dataclass
class Run:
    """One engine run.

    Attributes:
        name: a label for tables and plots.
        engine: the ``LLMEngine`` (its ``step_stats`` and ``tracer`` stay available).
        outputs: ``RequestOutput`` by request id, in submission order.
        wall_s, cpu_s: wall-clock and process CPU seconds spent in ``engine.step()``.
        queues: per step ``{"step", "waiting", "running", "swapped", "preempted"}`` with request ids,
            after the step (what ``pagedlab.viz.render_queues`` draws).
        arrivals: request id -> the step it was added before.
    """

    name: str
    engine: Any
    outputs: dict[str, Any]
    wall_s: float
    cpu_s: float
    queues: list[dict[str, Any]] = field(default_factory=list)
    arrivals: dict[str, int] = field(default_factory=dict)

    @property
    def step_stats(self) -> list:
        return self.engine.step_stats

    def token_ids(self) -> dict[str, list[int]]:
        return {rid: list(o.outputs[0].token_ids) for rid, o in self.outputs.items()}

    def summary(self) -> dict[str, float]:
        """Headline numbers (seconds; tokens/s)."""
        outs = list(self.outputs.values())
        gen = sum(len(o.outputs[0].token_ids) for o in outs)
        ms = [o.pagedlab_metrics for o in outs]
        tpots = [m.tpot for m in ms if m.tpot is not None]
        itls = [x for m in ms for x in m.inter_token_latencies]
        st = self.step_stats
        return {
            "steps": len(st),
            "generated": gen,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "tok_per_s": gen / self.wall_s if self.wall_s else float("nan"),
            "ttft_mean": statistics.fmean(m.ttft for m in ms),
            "ttft_max": max(m.ttft for m in ms),
            "e2e_mean": statistics.fmean(m.e2e_latency for m in ms),
            "e2e_max": max(m.e2e_latency for m in ms),
            "tpot_median": statistics.median(tpots) if tpots else float("nan"),
            "itl_max": max(itls) if itls else float("nan"),
            "preemptions": sum(m.num_preemptions for m in ms),
            "prefill_tokens": sum(s.num_prefill_tokens for s in st),
            "decode_tokens": sum(s.num_decode_tokens for s in st),
            "max_step_tokens": max((s.num_prefill_tokens + s.num_decode_tokens for s in st), default=0),
        }


def latency_anatomy(step_stats: Sequence[Any], outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where a run's TTFT and TPOT come from, step by step (lab 04: why continuous batching can
    measure *worse* per token than static batching on a CPU).

    Args:
        step_stats: the run's ``StepStats`` (``scheduled`` as ``(request_id, tokens, is_prefill)``,
            ``step_time`` in seconds).
        outputs: ``RequestOutput`` by id (for the TPOT and TTFT in seconds); optional.

    Returns:
        ``decode_with_prefill``: the share of (request, decode step) pairs whose step also carried
        another request's prefill (the decode waited for it); ``mixed_step_s`` / ``decode_only_step_s``:
        median step time of steps with a prefill and decodes / with decodes only;
        ``decode_step_s_by_batch``: batch size -> median time of a decode-only step of that size;
        ``first_token_step_mean``: mean number of steps until a request's first token (exact, unlike
        seconds); ``tpot_median_s``, ``ttft_mean_s`` when ``outputs`` is given.
    """
    if not step_stats:
        raise ValueError("latency_anatomy needs a run with at least one step (its step_stats is empty)")
    decodes = waited = 0
    mixed: list[float] = []
    pure: dict[int, list[float]] = {}
    first_token: dict[str, int] = {}
    decoding: set[str] = set()
    for k, st in enumerate(step_stats):
        kinds = [bool(p) for _, _, p in st.scheduled]
        n_dec = kinds.count(False)
        decodes += n_dec
        if any(kinds) and n_dec:
            waited += n_dec
            mixed.append(st.step_time)
        elif n_dec:
            pure.setdefault(n_dec, []).append(st.step_time)
        for rid, _, is_prefill in st.scheduled:
            if is_prefill and rid not in decoding:
                first_token[rid] = k + 1  # its prompt's latest chunk: the first token after k + 1 steps
            elif not is_prefill:
                decoding.add(rid)
    out: dict[str, Any] = {
        "decode_with_prefill": waited / decodes if decodes else 0.0,
        "mixed_step_s": statistics.median(mixed) if mixed else float("nan"),
        "decode_only_step_s": statistics.median([t for ts in pure.values() for t in ts]) if pure else float("nan"),
        "decode_step_s_by_batch": {b: statistics.median(ts) for b, ts in sorted(pure.items())},
        "first_token_step_mean": statistics.fmean(first_token.values()),
    }
    if outputs:
        ms = [o.pagedlab_metrics for o in outputs.values()]
        tpots = [m.tpot for m in ms if m.tpot is not None]
        out["tpot_median_s"] = statistics.median(tpots) if tpots else float("nan")
        out["ttft_mean_s"] = statistics.fmean(m.ttft for m in ms)
    return out


def explain_latency(runs: dict[str, Run]) -> str:
    """Lab 04's account of the ``static`` and ``continuous`` runs' TTFT and TPOT, every figure computed
    by :func:`latency_anatomy` from the runs themselves; in the learner's language (:mod:`pagedlab.i18n`)."""
    a = {name: latency_anatomy(r.step_stats, r.outputs) for name, r in runs.items()}
    s, c = a["static"], a["continuous"]
    by_batch = c["decode_step_s_by_batch"] | s["decode_step_s_by_batch"]
    lo, hi = min(by_batch), max(by_batch)
    lines = [
        f"median TPOT: static {1000 * s['tpot_median_s']:.0f} ms, continuous {1000 * c['tpot_median_s']:.0f} ms "
        f"({c['tpot_median_s'] / s['tpot_median_s']:.2f}x)",
        f"decode steps that also carried a newcomer's prefill: static {100 * s['decode_with_prefill']:.0f}%, "
        f"continuous {100 * c['decode_with_prefill']:.0f}%",
        f"median step time, continuous run: with a prefill {1000 * c['mixed_step_s']:.0f} ms, "
        f"decodes only {1000 * c['decode_only_step_s']:.0f} ms",
        f"median decode-only step: {lo} in the batch {1000 * by_batch[lo]:.0f} ms, "
        f"{hi} in the batch {1000 * by_batch[hi]:.0f} ms ({by_batch[hi] / by_batch[lo]:.2f}x)",
        f"mean steps until the first token: static {s['first_token_step_mean']:.1f}, "
        f"continuous {c['first_token_step_mean']:.1f}; "
        f"mean TTFT: static {s['ttft_mean_s']:.2f} s, continuous {c['ttft_mean_s']:.2f} s",
    ]
    return tr_lines("\n".join(lines))


def run_requests(
    engine: Any,
    requests: Sequence[tuple[str, list[int], Any]],
    *,
    name: str = "",
    arrive_at_step: dict[str, int] | None = None,
    priorities: dict[str, int] | None = None,
) -> Run:
    """Feed ``requests`` to ``engine`` and step it until everything finished.

    Args:
        engine: a fresh ``LLMEngine``.
        requests: ``(request_id, prompt_token_ids, SamplingParams)``.
        arrive_at_step: request id -> the step before which it is added (default 0: all at once).
            Its arrival time (for TTFT) is the moment it is added.
        priorities: request id -> priority (``policy="priority"``).
    """
    arrive = {rid: (arrive_at_step or {}).get(rid, 0) for rid, _, _ in requests}
    todo = sorted(requests, key=lambda r: arrive[r[0]])
    outputs: dict[str, Any] = {}
    queues: list[dict[str, Any]] = []
    wall = cpu = 0.0
    step = 0
    while todo or engine.has_unfinished_requests():
        while todo and arrive[todo[0][0]] <= step:
            rid, ids, params = todo.pop(0)
            engine.add_request(rid, {"prompt_token_ids": list(ids)}, params, priority=(priorities or {}).get(rid, 0))
        if not engine.has_unfinished_requests():
            step += 1  # nothing to do until the next arrival
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        for out in engine.step():
            outputs[out.request_id] = out
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        queues.append(engine.step_stats[-1].queues())
        step += 1
    order = [rid for rid, _, _ in requests]
    return Run(name, engine, {rid: outputs[rid] for rid in order if rid in outputs}, wall, cpu, queues, arrive)


def side_by_side(
    runs: Sequence[Any], titles: Sequence[str], *, max_num_batched_tokens: Any = None, interval: int = 250
):
    """A player whose frame ``i`` draws step ``i`` of every run's batch Gantt, one under the other.

    Args:
        runs: step lists (``step_stats``, tracer events or :func:`toy_serve` output), or :class:`Run`.
        titles: one heading per run.
        max_num_batched_tokens: draw a token budget line: one number for every chart, or one per run
            (``None`` entries draw none).

    The charts are drawn to be compared: they share the step columns and the scale of the tokens-per-step
    bars (the highest step or budget of all runs), so a chunked run's short steps look short beside a
    whole prefill's long one.
    """
    from pagedlab.viz import Player  # lazy: start-up time (Player imports ipywidgets)

    lists = [batch_steps(list(r.step_stats if isinstance(r, Run) else r)) for r in runs]
    n = max(len(s) for s in lists)
    lengths = [len(s) for s in lists]
    # Pad the shorter runs with empty steps, so every chart has the same columns and the race is visible.
    padded = [s + [empty_step((s[-1]["step"] if s else -1) + 1 + k) for k in range(n - len(s))] for s in lists]
    budgets = (
        list(max_num_batched_tokens)
        if isinstance(max_num_batched_tokens, (list, tuple))
        else [max_num_batched_tokens] * len(lists)
    )

    scale = max([sum(nt for _, nt, _ in s["scheduled"]) for s in sum(lists, [])] + [b or 0 for b in budgets] + [1])

    def render(i: int) -> str:
        parts = []
        for steps, length, title, budget in zip(padded, lengths, titles, budgets):
            head = f"{title} - finished after {length} steps" if i >= length else title
            parts.append(render_batch_gantt(steps, i, title=head, max_num_batched_tokens=budget, token_scale=scale))
        return "<div>" + "".join(f'<div style="margin-bottom:6px">{p}</div>' for p in parts) + "</div>"

    def caption(i: int, k: int) -> str:
        bits = []
        for steps, title in zip(lists, titles):
            if i < len(steps):
                sc = steps[i]["scheduled"]
                pre = sum(nt for _, nt, p in sc if p)
                dec = len(sc) - sum(1 for *_, p in sc if p)
                bits.append(
                    f"{title}: step {steps[i]['step']}, {len(sc)} request{'s' if len(sc) != 1 else ''}, "
                    f"{pre} prefill + {dec} decode token{'s' if dec != 1 else ''}"
                )
            else:
                bits.append(f"{title}: done")
        # the slider counts frames; each run's engine step is named with it (they differ when a run
        # does not start at step 0, e.g. after an engine's warm-up steps)
        return f"frame {i}  |  " + "  |  ".join(bits)

    return Player(list(range(n)), render=render, caption=caption, interval=interval, description="frame")


def batch_under_reservation(
    requests: Sequence[Any], capacity_tokens: int, max_model_len: int, block_size: int = 16
) -> dict[str, Any]:
    """Continuous batching on two allocators: running requests per step, same requests, same memory.

    Both replays admit waiting requests at every step (iteration-level scheduling); they differ
    only in memory: ``"reservation"`` gives each request ``max_model_len`` contiguous slots
    (``pagedlab.analysis.contiguous.replay_contiguous``, policy ``"max"``), ``"paged"`` gives it
    blocks as its tokens arrive (``replay_paged``, the real ``KVCacheManager``).

    Args:
        requests: ``pagedlab.sim.traces.TraceRequest`` list (as ``load_azure`` returns).
        capacity_tokens: KV memory in token slots; the paged pool has ``capacity_tokens // block_size`` blocks.

    Returns:
        ``{"reservation": [running per step], "paged": [...], "seats": capacity // max_model_len,
        "summary": {name: replay summary}}``.

    Raises:
        ValueError: ``capacity_tokens`` below ``max_model_len``.
    """
    if capacity_tokens < max_model_len:
        raise ValueError(f"capacity {capacity_tokens} holds no {max_model_len}-token reservation")
    res = {
        "reservation": replay_contiguous(list(requests), capacity_tokens, max_model_len, "max"),
        "paged": replay_paged(list(requests), capacity_tokens // block_size, block_size, max_model_len),
    }
    out: dict[str, Any] = {name: [s["num_running"] for s in r["steps"]] for name, r in res.items()}
    out["seats"] = capacity_tokens // max_model_len
    out["summary"] = {name: r["summary"] for name, r in res.items()}
    return out
