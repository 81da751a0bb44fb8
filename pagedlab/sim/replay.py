"""Trace replay on the real engine, and the ``pagedlab replay`` command.

``replay_on_engine`` feeds a (scaled, see ``traces.scale_for_cpu``) trace slice to a real
``pagedlab.LLMEngine`` serving SmolLM2 on the CPU, honouring arrival times on the wall clock:
between steps every request whose arrival time has passed is added; when the engine is idle the
clock skips ahead to the next arrival (nothing is in flight, so skipping changes no result).
Prompts are synthesised token ids of the traced lengths, Mooncake's shared blocks becoming
shared prefixes; outputs are forced to the traced length (greedy, ``ignore_eos``). It returns
the same ``ReplayResult`` as the simulator, with measured step times.

Command line (registered in ``pagedlab/cli.py``)::

    pagedlab replay azure-conv --sim --gpu H100 --model llama-2-7b --limit 500 --scheduling both --plot
    pagedlab replay mooncake-conv --engine --limit 12 --max-prompt 256 --enable-prefix-caching
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pagedlab import data
from pagedlab.config import SchedulerConfig
from pagedlab.errors import ConfigError, InvalidRequestError, TraceFormatError
from pagedlab.sampling_params import SamplingParams
from pagedlab.sim.hardware import get_gpu
from pagedlab.sim.metrics import ReplayResult, StepRecord
from pagedlab.sim.models import get_model
from pagedlab.sim.plots import save_figures
from pagedlab.sim.simulator import compare, gpu_cache_config, make_records, simulate
from pagedlab.sim.traces import TraceRequest, load_trace, scale_for_cpu, synthesize_prompts

#: Short names for the traces shipped in ``data/`` (see data/SOURCES.md).
TRACES = {
    "azure-code": "azure2023_AzureLLMInferenceTrace_code.csv",
    "azure-conv": "azure2023_AzureLLMInferenceTrace_conv.csv",
    "mooncake-conv": "mooncake_fast25_conversation_trace.jsonl",
    "mooncake-synthetic": "mooncake_fast25_synthetic_trace.jsonl",
}


def resolve_trace(name_or_path: str) -> Path:
    """A trace short name (``azure-conv`` ...) or a path, as an existing path.

    Raises:
        TraceFormatError: neither a known name nor an existing file.
    """
    if name_or_path in TRACES:
        path = data.directory() / TRACES[name_or_path]
    else:
        path = Path(name_or_path)
    if not path.is_file():
        raise TraceFormatError(f"trace {name_or_path!r} not found ({path}); give a file or one of {', '.join(TRACES)}")
    return path


def replay_on_engine(  # noqa: C901 - one branch per trace event kind
    engine_kwargs: dict[str, Any] | None,
    requests: Sequence[TraceRequest],
    prompts: Sequence[Sequence[int]] | None = None,
    seed: int = 0,
    engine=None,
    progress: bool = False,
    max_steps: int | None = None,
    warmup: bool = True,
) -> ReplayResult:
    """Replay a trace slice on the real engine with its arrival times.

    Args:
        engine_kwargs: ``LLMEngine`` arguments (``num_gpu_blocks``, ``max_num_seqs``,
            ``scheduling`` ...); ignored when ``engine`` is given.
        requests: the slice, already scaled to CPU size (``scale_for_cpu``); arrival times in s.
        prompts: token ids per request; default ``synthesize_prompts`` over the model's
            vocabulary, avoiding the tokenizer's special tokens.
        seed: prompt seed.
        engine: an existing idle ``LLMEngine`` to reuse (saves loading the model again).
        progress: tqdm bar over finished requests.
        max_steps: stop after this many steps (unfinished requests are aborted).
        warmup: first run a 2-token request that is not recorded, so one-off start-up costs do
            not land on the first traced request (and comparisons between engines are fair).
    Returns:
        A ``ReplayResult``: times in seconds from the replay start (idle gaps removed),
        step times measured. Requests the engine refuses (``InvalidRequestError``: too long for
        ``max_model_len`` or the pool) are in ``rejected``.
    """
    if engine is None:
        from pagedlab.engine.llm_engine import LLMEngine  # lazy: start-up time (the engine imports torch)

        engine = LLMEngine(**(engine_kwargs or {}))
    if engine.has_unfinished_requests():
        raise ValueError("replay_on_engine needs an idle engine")
    if prompts is None:
        prompts = _default_prompts(engine, requests, seed)
    if warmup:
        _warm_up(engine)
    replay = _EngineReplay(engine, requests, prompts, _empty_result(engine))
    bar = None
    if progress:
        from tqdm.auto import tqdm  # lazy: start-up time (tqdm.auto imports ipywidgets in a notebook)

        bar = tqdm(total=len(requests), unit="req", desc="engine")
    while replay.pending or engine.has_unfinished_requests():
        if max_steps is not None and len(replay.result.steps) >= max_steps:
            for rid in list(engine.scheduler.requests):
                engine.abort_request(rid)
            break
        replay.admit_arrivals()
        if not engine.has_unfinished_requests():
            replay.skip_idle()
            continue
        new = replay.run_step()
        if bar is not None and new:
            bar.update(new)
    if bar is not None:
        bar.close()
    return replay.result


def _default_prompts(engine: Any, requests: Sequence[TraceRequest], seed: int) -> list[list[int]]:
    """Synthetic prompts of the traced lengths over the model's vocabulary, avoiding special tokens."""
    vocab = engine.model_config.vocab_size
    special = [i for i in getattr(engine.tokenizer, "all_special_ids", []) if i < vocab]
    lo = max(special) + 1 if special and max(special) < vocab // 2 else 0
    return synthesize_prompts(requests, vocab, seed, min_token_id=lo)


def _warm_up(engine: Any) -> None:
    """The first forward passes pay one-off costs (allocator, kernels); keep them out of the timings."""
    engine.add_request(
        "__warmup__", {"prompt_token_ids": [0] * 8}, SamplingParams(temperature=0.0, max_tokens=2, ignore_eos=True)
    )
    while engine.has_unfinished_requests():
        engine.step()


def _empty_result(engine: Any) -> ReplayResult:
    cc, sc = engine.cache_config, engine.scheduler_config
    return ReplayResult(
        num_gpu_blocks=cc.num_gpu_blocks,
        config=dict(
            mode="engine",
            model="smollm2-135m",
            scheduling=type(engine.scheduler).__name__,
            block_size=cc.block_size,
            num_gpu_blocks=cc.num_gpu_blocks,
            enable_prefix_caching=cc.enable_prefix_caching,
            **asdict(sc),
        ),
    )


class _EngineReplay:
    """The clock of a replay on the real engine: requests arrive at their traced times, idle gaps
    are skipped (``skipped`` seconds are removed from the timeline), each step is recorded."""

    def __init__(
        self, engine: Any, requests: Sequence[TraceRequest], prompts: Sequence[Sequence[int]], result: ReplayResult
    ) -> None:
        self.engine, self.requests, self.prompts, self.result = engine, requests, prompts, result
        self.t_start = time.perf_counter()
        self.base = requests[0].arrival_time if requests else 0.0
        self.skipped = 0.0
        self.n_done = engine.finished_requests.total
        self.pending = deque(range(len(requests)))

    def now(self) -> float:
        return time.perf_counter() - self.t_start + self.skipped

    def admit_arrivals(self) -> None:
        """Submit every request whose arrival time has come; refused ones go to ``result.rejected``."""
        while self.pending and self.requests[self.pending[0]].arrival_time - self.base <= self.now():
            i = self.pending.popleft()
            tr = self.requests[i]
            try:
                self.engine.add_request(
                    str(i),
                    {"prompt_token_ids": list(self.prompts[i])},
                    SamplingParams(temperature=0.0, max_tokens=max(1, tr.output_len), ignore_eos=True),
                    arrival_time=self.t_start - self.skipped + (tr.arrival_time - self.base),
                )
            except InvalidRequestError as e:
                self.result.rejected.append((i, str(e)))

    def skip_idle(self) -> None:
        """Nothing to run: jump the clock to the next arrival."""
        if self.pending:
            self.skipped += max(0.0, self.requests[self.pending[0]].arrival_time - self.base - self.now())

    def run_step(self) -> int:
        """One engine step, recorded; returns how many requests finished in it."""
        start = self.now()
        self.engine.step()
        st = self.engine.step_stats[-1]
        self.result.steps.append(
            StepRecord(
                step=st.step,
                start_time=start,
                step_time=st.step_time,
                num_seqs=len(st.scheduled),
                num_scheduled_tokens=st.num_prefill_tokens + st.num_decode_tokens,
                num_prefill_tokens=st.num_prefill_tokens,
                num_decode_tokens=st.num_decode_tokens,
                num_preempted=len(st.preempted),
                kv_blocks_used=st.kv_blocks_used,
                kv_blocks_free=st.kv_blocks_free,
                running=st.running,
                waiting=st.waiting,
                swapped=st.swapped,
            )
        )
        new = self.engine.finished_requests.since(self.n_done)
        self.n_done = self.engine.finished_requests.total
        for req in new:
            if req.token_times:
                self.result.requests.append(make_records(req, t0=self.t_start - self.skipped))
        return len(new)


# --- command line ---------------------------------------------------------------------------------
def int_at_least(lo: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}")
        return v

    return parse


def _nonneg_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v >= 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=f"trace file (.csv Azure, .jsonl Mooncake) or one of: {', '.join(TRACES)}")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--sim", dest="mode", action="store_const", const="sim", help="cost-model simulator at GPU scale (default)"
    )
    mode.add_argument(
        "--engine",
        dest="mode",
        action="store_const",
        const="engine",
        help="real engine: SmolLM2-135M on this CPU, trace scaled down",
    )
    p.set_defaults(mode="sim")
    p.add_argument("--gpu", default="H100", help="sim: A100-80G, H100, H200, or e.g. 2xH100 (default H100)")
    p.add_argument(
        "--model",
        default="llama-2-7b",
        help="sim: llama-2-7b, llama-13b, llama-2-70b, llama-3-70b, llama-3-8b (default llama-2-7b)",
    )
    p.add_argument(
        "--limit", type=int_at_least(1), default=None, help="requests to replay (default 500 sim, 16 engine)"
    )
    p.add_argument("--start", type=int_at_least(0), default=0, help="index of the first request of the slice")
    p.add_argument("--scheduling", choices=["continuous", "static", "both"], default="continuous")
    p.add_argument("--block-size", type=int_at_least(1), default=16)
    p.add_argument(
        "--num-gpu-blocks",
        type=int_at_least(1),
        default=None,
        help="KV pool size (default: sim from GPU memory; engine 512)",
    )
    p.add_argument("--gpu-memory-utilization", type=_nonneg_float, default=0.9, help="sim: fraction of GPU memory")
    p.add_argument("--max-num-seqs", type=int_at_least(1), default=None, help="default 256 sim, 32 engine")
    p.add_argument("--max-num-batched-tokens", type=int_at_least(1), default=None, help="default 8192 sim, 512 engine")
    p.add_argument("--long-prefill-token-threshold", type=int_at_least(0), default=0)
    p.add_argument("--enable-prefix-caching", action="store_true")
    p.add_argument("--preemption-mode", choices=["recompute", "swap"], default="recompute")
    p.add_argument(
        "--time-scale",
        type=_nonneg_float,
        default=1.0,
        help="multiply inter-arrival times (<1 = heavier load; 0 = all at once)",
    )
    p.add_argument("--max-prompt", type=int_at_least(1), default=128, help="engine: longest scaled prompt (tokens)")
    p.add_argument("--max-output", type=int_at_least(1), default=16, help="engine: longest scaled output (tokens)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="directory for requests_*.csv, steps_*.csv, summary.json and plots")
    p.add_argument(
        "--plot",
        action="store_true",
        help="save TTFT/TPOT CDFs and KV usage as PNG in --out (default ./replay_results)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _writable_dir(out_dir: str) -> Path:
    """``out_dir`` created if need be and checked writable, so a long replay never ends in an OSError.

    Raises:
        ConfigError: it is a file, lies under one, or cannot be written (read-only, no permission).
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".pagedlab_write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"--out {out_dir}: cannot write the results there ({e.strerror or e})") from None
    return out


def _write_csv(path: Path, rows) -> None:
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def run(args: argparse.Namespace) -> dict[str, ReplayResult]:
    """Do what ``pagedlab replay`` does and return the results by scheduling name."""
    limit = args.limit if args.limit is not None else (500 if args.mode == "sim" else 16)
    path = resolve_trace(args.trace)
    requests = load_trace(path, limit=limit, start=args.start)
    if not requests:
        raise TraceFormatError(f"{path}: no requests in the slice start={args.start} limit={limit}")
    kinds = ["static", "continuous"] if args.scheduling == "both" else [args.scheduling]
    if args.mode == "sim":
        return _run_sim(args, requests, kinds)
    return _run_engine(args, requests, kinds)


def _run_sim(args: argparse.Namespace, requests: list[TraceRequest], kinds: list[str]) -> dict[str, ReplayResult]:
    """The trace in the simulator on the chosen model and GPU (``--mode sim``)."""
    try:
        model, gpu = get_model(args.model), get_gpu(args.gpu)
    except KeyError as e:
        raise ConfigError(e.args[0]) from None
    requests = scale_for_cpu(requests, max_prompt=10**9, max_output=10**9, time_scale=args.time_scale)
    try:
        cc = gpu_cache_config(
            model, gpu, args.block_size, args.gpu_memory_utilization, enable_prefix_caching=args.enable_prefix_caching
        )
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if args.num_gpu_blocks is not None:
        cc = dataclasses.replace(cc, num_gpu_blocks=args.num_gpu_blocks)
    longest = max(r.prompt_len + r.output_len for r in requests)
    sc = SchedulerConfig(
        max_num_seqs=args.max_num_seqs or 256,
        max_num_batched_tokens=args.max_num_batched_tokens or 8192,
        max_model_len=max(longest, 1),
        long_prefill_token_threshold=args.long_prefill_token_threshold,
        preemption_mode=args.preemption_mode,
    )
    progress = not args.no_progress
    return {k: simulate(requests, sc, cc, model, gpu, scheduling=k, seed=args.seed, progress=progress) for k in kinds}


def _run_engine(args: argparse.Namespace, requests: list[TraceRequest], kinds: list[str]) -> dict[str, ReplayResult]:
    """The trace, scaled down for a CPU, on the real engine serving SmolLM2 (``--mode engine``)."""
    from pagedlab.engine.llm_engine import LLMEngine  # lazy: start-up time (the engine imports torch)

    requests = scale_for_cpu(
        requests, max_prompt=args.max_prompt, max_output=args.max_output, time_scale=args.time_scale
    )
    num_gpu_blocks = args.num_gpu_blocks or 512
    kw = dict(
        block_size=args.block_size,
        num_gpu_blocks=num_gpu_blocks,
        max_num_seqs=args.max_num_seqs or 32,
        max_num_batched_tokens=args.max_num_batched_tokens or 512,
        long_prefill_token_threshold=args.long_prefill_token_threshold,
        enable_prefix_caching=args.enable_prefix_caching,
        preemption_mode=args.preemption_mode,
        num_cpu_blocks=num_gpu_blocks if args.preemption_mode == "swap" else 0,
        seed=args.seed,
    )
    results: dict[str, ReplayResult] = {}
    for k in kinds:
        engine = LLMEngine(scheduling=k, **kw)
        results[k] = replay_on_engine(None, requests, engine=engine, seed=args.seed, progress=not args.no_progress)
    return results


def main(args: argparse.Namespace) -> int:
    """``pagedlab replay``: replay, print a summary table, optionally write CSV/JSON/PNG.

    Raises:
        ConfigError: ``--out`` names a place that cannot hold the results (checked before the replay).
    """
    out_dir = args.out or ("replay_results" if args.plot else None)
    out = _writable_dir(out_dir) if out_dir else None
    results = run(args)
    first = next(iter(results.values()))
    cfg = first.config
    where = f"{cfg['model']} on {cfg['gpu']}" if cfg["mode"] == "sim" else "SmolLM2-135M on this CPU"
    print(
        f"pagedlab replay {args.trace}: {len(first.requests)} requests, {where}, "
        f"{cfg['num_gpu_blocks']:,} KV blocks of {cfg['block_size']} tokens"
    )
    for name, res in results.items():
        if res.rejected:
            print(
                f"  {name}: {len(res.rejected)} request(s) rejected, e.g. #{res.rejected[0][0]}: {res.rejected[0][1]}"
            )
    print(compare(results))
    if out is not None:
        for name, res in results.items():
            _write_csv(out / f"requests_{name}.csv", res.request_rows())
            _write_csv(out / f"steps_{name}.csv", res.step_rows())
        summary = {
            name: {"config": res.config, "summary": res.summary(), "rejected": res.rejected}
            for name, res in results.items()
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        if args.plot:
            for p in save_figures(results, out):
                print(f"wrote {p}")
        print(f"wrote {out}/summary.json and per-request/per-step CSVs")
    return 0
