"""The serving loop: ``add_request`` / ``step`` / ``abort_request``, as vLLM's ``LLMEngine``.

One ``step()`` = the scheduler picks requests and token counts (allocating KV blocks), the
model runner computes them in one flat batch and samples, and the scheduler appends the
tokens and frees finished requests. ``LLM`` (``pagedlab.engine.llm``) drives this loop.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import operator
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
from pagedlab.engine import malloc
from pagedlab.engine.arg_utils import EngineArgs, check_model_arg
from pagedlab.engine.decoded_tokens import fill_decoded_tokens
from pagedlab.engine.exclusive import OneAtATime
from pagedlab.engine.history import History
from pagedlab.engine.metrics import EngineStats, Metric
from pagedlab.engine.stop_strings import check_stop_strings, output_text
from pagedlab.errors import ComponentError, ConfigError, InvalidRequestError
from pagedlab.kernels.backends import BACKENDS, default_backend
from pagedlab.model.loader import load_model_cached
from pagedlab.outputs import CompletionOutput, RequestMetrics, RequestOutput, TokenLogprobs
from pagedlab.parts.build import build_parts
from pagedlab.parts.slots import Components
from pagedlab.request import Request, RequestStatus
from pagedlab.sampling_params import RequestOutputKind, SamplingParams
from pagedlab.sched.scheduler import Scheduler, SchedulerOutput

if TYPE_CHECKING:
    from pagedlab.core.kv_cache_manager import KVCacheManager
    from pagedlab.model.llama import LlamaConfig, LlamaForCausalLM


logger = logging.getLogger("pagedlab")


def _token_id_list(ids: object, what: str) -> list[int]:
    """``ids`` as a list of Python ints (numpy/torch integer scalars accepted via ``__index__``).

    Raises:
        InvalidRequestError: ``ids`` is not a list/tuple, or an item is not an integer (float, str,
            None and bool are refused: ``True`` is not a token id).
    """
    if not isinstance(ids, (list, tuple)):
        raise InvalidRequestError(f"{what} must be a list of ints, got {type(ids).__name__}")
    out = []
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not hasattr(type(t), "__index__"):
            raise InvalidRequestError(f"{what} must be a list of ints, but item {i} is {type(t).__name__} {t!r}")
        out.append(operator.index(t))
    return out


def _stop_terminated(req: Request) -> bool:
    """The request ended on a token (EOS or one of ``stop_token_ids``), not a stop string nor the length:
    vLLM 0.32's ``finish_reason == FinishReason.STOP`` from the engine core (v1/engine/output_processor.py:769)."""
    return req.status == RequestStatus.FINISHED_STOPPED and not isinstance(req.stop_reason, str)


def check_priority(priority: object) -> None:
    """Raise ``InvalidRequestError`` unless ``priority`` is an int (not a bool)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidRequestError(f"priority must be an int, got {type(priority).__name__} {priority!r}")


def check_arrival_time(arrival_time: object) -> None:
    """Raise ``InvalidRequestError`` unless ``arrival_time`` is None or a finite number of seconds (not a bool).

    Checked at submission: the first step computes TTFT from it, and a bad one raised there, aborting
    every request in flight (the step's all-or-nothing recovery)."""
    if arrival_time is None:
        return
    if isinstance(arrival_time, bool) or not isinstance(arrival_time, (int, float)) or not math.isfinite(arrival_time):
        raise InvalidRequestError(
            f"arrival_time must be None or a finite number of seconds (time.perf_counter()'s clock), "
            f"got {_typed(arrival_time)}"
        )


def _typed(value: object) -> str:
    """``"int 7"``: a value with its type's name, for error messages."""
    return f"{type(value).__name__} {value!r}"


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


#: ``LLMEngine(parallel_sampling=...)``: vLLM v0's copy-on-write fork, or vLLM v1's n child requests.
PARALLEL_SAMPLING = ("fork", "requests")


def _seeded_generators(params: SamplingParams) -> list[torch.Generator] | None:
    """One generator per completion, seeded ``seed + i``; None without a seed.

    Raises:
        InvalidRequestError: torch cannot take the seed (outside ``[-2**63, 2**64)``).
    """
    if params.seed is None:
        return None
    try:
        return [torch.Generator().manual_seed(params.seed + i) for i in range(params.n)]
    except (RuntimeError, OverflowError, ValueError) as e:
        raise InvalidRequestError(
            f"seed={params.seed} (n={params.n}) is outside the range torch's random generator accepts: {e}"
        ) from None


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


@dataclass
class _Group:
    """The ``n`` completions of one prompt (vLLM v0's SequenceGroup)."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    n: int
    arrival_time: float
    members: list[Request] = field(default_factory=list)
    finished_members: dict[int, Request] = field(default_factory=dict)


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
        net, meta = self._load(model, tokenizer, eos_token_id)
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
        check_kv_cache_fits(self.cache_config, self.model_config.kv_bytes_per_token(4), device)
        self.eos_token_id: int | None = meta["eos_token_id"]
        self.scheduling = scheduling
        self.tracer = None
        if trace:
            from pagedlab.trace import Tracer

            self.tracer = Tracer()
        self._build_runner(net, attention_backend, device)
        self.components = components if components is not None else Components.kit()
        self.current_step = 0  # the step being run, for the guards' messages
        self._install_components()
        self._init_request_state(seed, log_stats)
        self.model_name = model_name or (str(model) if isinstance(model, str) else "SmolLM2-135M-Instruct")

    def _build_runner(self, net: LlamaForCausalLM, attention_backend: str, device: str) -> None:
        """The model runner: ``net`` on ``device`` with the KV pools of ``cache_config`` (and swap space)."""
        from pagedlab.engine.model_runner import ModelRunner

        cc = self.cache_config
        self.model_runner = ModelRunner(
            net.to(device),
            cc.block_size,
            cc.num_gpu_blocks,
            cc.num_cpu_blocks,
            attention_backend=attention_backend,
            device=device,
        )

    def _load(
        self, model: LlamaForCausalLM | str | os.PathLike[str] | None, tokenizer: Any, eos_token_id: int | None
    ) -> tuple[LlamaForCausalLM, dict[str, Any]]:
        """The model and its metadata (``eos_token_id``), loaded unless given; sets ``self.tokenizer``
        (an HF tokenizer, used duck-typed: ``__call__``, ``decode``, ``apply_chat_template``; or None)."""
        self.tokenizer: Any
        if isinstance(model, torch.nn.Module):
            # An already-built LlamaForCausalLM (tests use tiny random-weight models); prompts
            # must then be token ids unless a tokenizer is given.
            self.tokenizer = tokenizer
            return model, {"eos_token_id": eos_token_id}
        check_model_arg(model)
        net, loaded, meta = load_model_cached(model)
        self.tokenizer = tokenizer if tokenizer is not None else loaded
        return net, meta

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
        # Output groups by the caller's request id, and by the id of each member Request (fork
        # children included): groups are tracked structurally, request ids are never parsed.
        self._groups: dict[str, _Group] = {}
        # Seeded requests only: the generators of the request's next sample, always a list - the
        # prompt's n generators until an n > 1 prompt forks, then one per completion.
        self._gens: dict[str, list[torch.Generator]] = {}
        # Output group of every member Request (fork children included), by the member's id.
        self._member_group: dict[str, _Group] = {}
        self._ids = itertools.count()
        # The last STEP_STATS_KEPT steps and FINISHED_REQUESTS_KEPT finished requests only: an engine
        # serving for hours must not keep one record per step forever (``History``; assign a larger
        # ``History(maxlen)`` to keep more).
        self.step_stats: History[StepStats] = History(STEP_STATS_KEPT)
        self.finished_requests: History[Request] = History(FINISHED_REQUESTS_KEPT)
        self.log_stats = log_stats
        self.stats = EngineStats()
        self._logprobs: dict[str, list[TokenLogprobs]] = {}

    def _install_components(self) -> None:
        """(Re)build the KV-cache manager and the scheduler, and set the model runner's hooks, from
        ``self.components`` (``pagedlab.parts``): a learner's part runs behind its guard.
        Called at construction and when a guard switches a slot back to the kit's part (idle engine)."""
        from pagedlab.core.kv_cache_manager import KVCacheManager

        cc, sc = self.cache_config, self.scheduler_config
        from pagedlab.sched.static import StaticScheduler

        scheduler_cls: type[Scheduler] = StaticScheduler if self.scheduling == "static" else Scheduler
        parts = build_parts(self.components, lambda: self.current_step, scheduler_cls)
        self.kv_cache_manager = KVCacheManager.from_config(cc, sc, tracer=self.tracer, **parts.kv_kwargs)
        step_count = self.scheduler.step_count if hasattr(self, "scheduler") else 0
        self.scheduler: Scheduler = parts.scheduler_cls(
            sc, cc, self.kv_cache_manager, tracer=self.tracer, **parts.scheduler_kwargs
        )
        self.scheduler.step_count = step_count
        self.scheduler.pick_victim_fn = parts.pick_victim_fn
        self.scheduler.preempt_retry_fn = parts.preempt_retry_fn
        self.model_runner.slot_mapping_fn = parts.slot_mapping_fn
        # Lab 08's Triton tile load runs inside the Triton kernel: on the "triton" backend only.
        override = parts.decode_override if self.model_runner.backend == "triton" else None
        self.model_runner.decode_override = override
        self.model_runner.kv_tile_load = None if override is not None else parts.kv_tile_load

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

    # --- submission ----------------------------------------------------------------------------
    def _tokenize(self, prompt: object) -> tuple[str | None, list[int]]:
        """``(text or None, token ids)`` of one prompt; changes no engine state.

        Args:
            prompt: text (tokenized without the chat template), a list of token ids, or a dict
                ``{"prompt_token_ids": [...]}`` / ``{"prompt": "..."}`` (vLLM's TokensPrompt/TextPrompt).
        Raises:
            InvalidRequestError: any other type, a dict with neither key, token ids that are not
                ints (floats, strings, None, bools), or text without a tokenizer.
        """
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                text = prompt.get("prompt")
                if text is not None and not isinstance(text, str):
                    raise InvalidRequestError(
                        f'a dict prompt\'s "prompt" must be a str or None, got {type(text).__name__}'
                    )
                return text, _token_id_list(prompt["prompt_token_ids"], 'the dict prompt\'s "prompt_token_ids"')
            if not isinstance(prompt.get("prompt"), str):
                raise InvalidRequestError(
                    'a dict prompt needs "prompt_token_ids" (a list of ints) or "prompt" '
                    f"(a str); got keys {sorted(map(str, prompt))}"
                )
            prompt = prompt["prompt"]
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise InvalidRequestError("this engine has no tokenizer: pass token ids")
            return prompt, list(self.tokenizer(prompt)["input_ids"])
        if isinstance(prompt, (list, tuple)):
            return None, _token_id_list(prompt, "a token-id prompt")
        raise InvalidRequestError(f"a prompt must be a str, a list of token ids or a dict, got {type(prompt).__name__}")

    def validate_request(self, prompt_token_ids: list[int], params: SamplingParams) -> None:
        """Check a request before it touches any engine state.

        Together with the scheduler's abort of a request that outgrows the budget after
        preemption, this is the progress guarantee: every accepted request finishes.

        Raises:
            InvalidRequestError: empty prompt, prompt of ``max_model_len`` tokens or more, token ids
                outside the vocabulary, ``n`` above ``max_num_seqs`` (a fork group runs its n sequences
                together; under ``parallel_sampling="requests"`` they run independently, as in vLLM v1, and
                each must fit on its own), ``logprobs`` above ``max_logprobs``, a
                request that can never fit in the whole KV pool, or (with ``enable_chunked_prefill=False``) a prompt longer than
                ``max_num_batched_tokens``.
        """
        n_prompt = len(prompt_token_ids)
        if n_prompt == 0:
            raise InvalidRequestError("the prompt is empty: it must have at least one token")
        vocab = self.model_config.vocab_size
        bad = [t for t in prompt_token_ids if not 0 <= t < vocab]
        if bad:
            raise InvalidRequestError(f"prompt token ids {bad[:5]} are outside the vocabulary [0, {vocab})")
        # vLLM 0.32's SamplingParams._validate_stop_token_ids (sampling_params.py:1047), its message and fields
        bad = [t for t in params.stop_token_ids or () if not 0 <= t < vocab]
        if bad:
            raise InvalidRequestError(
                f"token_id(s) {bad} in stop_token_ids contain out-of-vocab token ids. Vocabulary size: {vocab}",
                parameter="stop_token_ids",
                value=bad,
            )
        sc = self.scheduler_config
        # With chunking off a prompt runs in one step. long_prefill_token_threshold cannot be counted on
        # to cut it: vLLM 0.32 lifts it for a lone request (``Scheduler._step_long_prefill_cap``).
        if self.scheduling == "continuous" and not sc.enable_chunked_prefill and n_prompt > sc.max_num_batched_tokens:
            raise InvalidRequestError(
                f"the prompt has {n_prompt} tokens but enable_chunked_prefill=False schedules a prompt whole and "
                f"one step holds max_num_batched_tokens={sc.max_num_batched_tokens}; it could never run. "
                "Raise max_num_batched_tokens or enable chunked prefill"
            )
        max_len = sc.max_model_len
        if n_prompt >= max_len:
            raise InvalidRequestError(
                f"the prompt has {n_prompt} tokens, which leaves no room to generate within "
                f"max_model_len={max_len}; shorten the prompt or raise max_model_len"
            )
        # A fork group runs its n sequences together; vLLM v1's n child requests run independently
        together = params.n if self.parallel_sampling == "fork" else 1
        if together > self.scheduler_config.max_num_seqs:
            raise InvalidRequestError(
                f"n={params.n} completions run as {params.n} sequences but max_num_seqs="
                f"{self.scheduler_config.max_num_seqs}; lower n or raise max_num_seqs"
            )
        self._check_logprobs(params)
        bs, pool = self.cache_config.block_size, self.cache_config.num_gpu_blocks
        max_tokens = max_len - n_prompt if params.max_tokens is None else params.max_tokens
        need = -(-min(n_prompt + max_tokens, max_len) // bs) * together
        if need > pool:
            raise InvalidRequestError(
                f"this request needs up to {need} KV blocks ({n_prompt} prompt + {max_tokens} output tokens, "
                f"n={params.n}, block_size={bs}) but the whole pool has num_gpu_blocks={pool}; it could never "
                f"run. Lower max_tokens or raise num_gpu_blocks"
            )

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
            InvalidRequestError: see ``_tokenize`` and ``validate_request``; also a duplicate id, a
                non-int priority, an ``arrival_time`` that is not a finite number or a seed torch's
                generator cannot take. Nothing is queued then.
        """
        params = params or SamplingParams()
        if not isinstance(params, SamplingParams):
            raise InvalidRequestError(f"params must be SamplingParams, got {type(params).__name__}")
        check_priority(priority)
        check_arrival_time(arrival_time)
        if request_id is not None and str(request_id) in self._groups:
            raise InvalidRequestError(f"request id {str(request_id)!r} is already in use")
        text, ids = self._tokenize(prompt)
        params = self.resolve_max_tokens(ids, params)
        self.validate_request(ids, params)
        gens = _seeded_generators(params)
        # Nothing above changed the engine; everything below cannot fail.
        request_id = str(next(self._ids)) if request_id is None else str(request_id)
        now = time.perf_counter() if arrival_time is None else arrival_time
        # Any string is a valid id; only when a live request (e.g. a fork child) already uses it
        # does the internal Request get a fresh one. Outputs always carry the caller's id.
        if params.n > 1 and self.parallel_sampling == "requests":
            members = self._child_requests(request_id, ids, params, gens, now, priority, cache_salt)
        else:
            members = [self._make_request(self._fresh_request_id(request_id), ids, params, now, priority, cache_salt)]
            if gens is not None:
                self._gens[members[0].request_id] = gens
        group = _Group(request_id, text, ids, params.n, now, members)
        self._groups[request_id] = group
        for req in members:
            self._member_group[req.request_id] = group
            self.scheduler.add_request(req)
        return request_id

    def _child_requests(
        self,
        request_id: str,
        ids: list[int],
        params: SamplingParams,
        gens: list[torch.Generator] | None,
        now: float,
        priority: int,
        cache_salt: str | None,
    ) -> list[Request]:
        """The n requests of an ``n > 1`` prompt under ``parallel_sampling="requests"``, as vLLM 0.32's
        ``ParentRequest.get_child_info``: id ``f"{i}_{request_id}"``, ``n=1``, seed ``seed + i``."""
        members = []
        for i in range(params.n):
            seed = None if params.seed is None else params.seed + i
            child = dataclasses.replace(params, n=1, seed=seed)
            req = self._make_request(self._fresh_request_id(f"{i}_{request_id}"), ids, child, now, priority, cache_salt)
            if gens is not None:
                self._gens[req.request_id] = [gens[i]]
            members.append(req)
        return members

    def _check_logprobs(self, params: SamplingParams) -> None:
        """Refuse ``logprobs`` above ``max_logprobs`` (-1 on either side: the whole vocabulary), as vLLM
        0.11's input processor does ("Requested sample logprobs ... greater than max allowed").

        Raises:
            InvalidRequestError: the request asks for more log-probabilities per token than allowed.
        """
        if params.logprobs is None:
            return
        vocab = self.model_config.vocab_size
        asked = vocab if params.logprobs == -1 else params.logprobs
        allowed = vocab if self.max_logprobs == -1 else self.max_logprobs
        if asked > allowed:
            raise InvalidRequestError(
                f"logprobs={params.logprobs} asks for {asked} log-probabilities per token, more than "
                f"max_logprobs={self.max_logprobs} allows; lower logprobs or raise max_logprobs (an engine argument)"
            )

    def resolve_max_tokens(self, prompt_token_ids: list[int], params: SamplingParams) -> SamplingParams:
        """``max_tokens=None`` means "up to ``max_model_len``" (as vLLM): a copy with it filled in."""
        if params.max_tokens is not None:
            return params
        room = max(self.scheduler_config.max_model_len - len(prompt_token_ids), 1)
        return dataclasses.replace(params, max_tokens=room, min_tokens=min(params.min_tokens, room))

    def _fresh_request_id(self, wanted: str) -> str:
        """``wanted`` if no live Request uses it, else ``wanted#k`` for the smallest free k >= 1."""
        rid, k = wanted, 0
        while rid in self._member_group or rid in self.scheduler.requests:
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
        return Request(
            rid,
            ids,
            params,
            arrival_time=arrival,
            priority=priority,
            eos_token_id=self.eos_token_id,
            block_hasher=self.kv_cache_manager.block_hasher,
            cache_salt=cache_salt,
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
                f"abort_request takes a request id (str) or a list of them, got {_typed(request_id)}"
                + (
                    f" (add_request keeps the id {request_id!r} as {str(request_id)!r})"
                    if isinstance(request_id, int)
                    else ""
                )
            )
        for rid in rids:
            if not isinstance(rid, str):
                raise InvalidRequestError(
                    f"request ids are strings: abort_request got {_typed(rid)}"
                    + (f" (add_request keeps the id {rid!r} as {str(rid)!r})" if isinstance(rid, int) else "")
                )
        for rid in rids:
            group = self._groups.get(rid)
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
        block_ids = {
            s.request.request_id: self.kv_cache_manager.get_block_ids(s.request.request_id) for s in out.scheduled
        }
        # An n>1 prompt samples all its first tokens from the prompt's last row, then forks.
        extra: dict[str, int] = {}
        gens: dict[str, torch.Generator | list[torch.Generator]] = {}
        for s in out.scheduled:
            rid = s.request.request_id
            g = self._member_group.get(rid)
            first = g is not None and s.samples and s.request.num_output_tokens == 0 and len(g.members) == 1
            n = g.n if first and g is not None else 1
            if n > 1:
                extra[rid] = n
            own = self._gens.get(rid)
            gens[rid] = (own if n > 1 else own[0]) if own else self.generator
        # execute() takes a list of generators for an n > 1 parent (it indexes g[j]), which its
        # annotation (Generator | None) does not say yet: drop this ignore once it does.
        sampled = self.model_runner.execute(out, block_ids, extra, gens)  # type: ignore[arg-type]
        now = time.perf_counter()
        for rid, toks in list(sampled.items()):
            if len(toks) > 1:
                self._fork(rid, toks, sampled)
        flat = {rid: toks[0] for rid, toks in sampled.items()}
        self._record_logprobs(sampled)
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
        finished += self._check_stop_strings(flat, finished)
        outputs = []
        for r in finished:
            o = self._on_finished(r, now)
            if o is not None:
                outputs.append(o)
        outputs += self._partial_outputs(flat, {o.request_id for o in outputs})
        self.step_stats.append(self._make_step_stats(out, t0, t_sched))
        self._trim_heap()
        return outputs

    def _trim_heap(self) -> None:
        """Every ``MALLOC_TRIM_EVERY`` steps, hand the C heap's freed pages back (``pagedlab.engine.malloc``)."""
        if MALLOC_TRIM_EVERY and self.step_stats.total % MALLOC_TRIM_EVERY == 0:
            malloc.trim()

    def _make_step_stats(self, out: SchedulerOutput, t0: float, t_sched: float) -> StepStats:
        """This step's ``StepStats``; takes (and resets) the manager's prefix-cache stats."""
        kv, sched = self.kv_cache_manager, self.scheduler
        cache = kv.make_prefix_cache_stats()
        return StepStats(
            step=out.step,
            scheduled=[(s.request.request_id, s.num_tokens, s.is_prefill) for s in out.scheduled],
            num_prefill_tokens=sum(s.num_tokens for s in out.scheduled if s.is_prefill),
            num_decode_tokens=sum(s.num_tokens for s in out.scheduled if not s.is_prefill),
            preempted=list(out.preempted),
            kv_blocks_used=self.cache_config.num_gpu_blocks - kv.num_free_blocks,
            kv_blocks_free=kv.num_free_blocks,
            step_time=time.perf_counter() - t0,
            sched_time=t_sched,
            running=len(sched.running),
            waiting=len(sched.waiting),
            swapped=len(sched.swapped),
            waiting_ids=[r.request_id for r in sched.waiting],
            running_ids=[r.request_id for r in sched.running],
            swapped_ids=[r.request_id for r in sched.swapped],
            prefix_cache_hits=cache.hits,
            prefix_cache_queries=cache.queries,
        )

    def _fork(self, parent_id: str, toks: list[int], sampled: dict[str, list[int]]) -> None:
        """Create completions 1..n-1 sharing the parent's blocks copy-on-write (vLLM v0 fork)."""
        parent = self.scheduler.requests[parent_id]
        group = self._member_group[parent_id]
        gens = self._gens.get(parent_id)
        for i, tok in enumerate(toks[1:], start=1):
            child = self._make_request(
                self._fresh_request_id(f"{group.request_id}#{i}"),
                parent.prompt_token_ids,
                parent.sampling_params,
                parent.arrival_time,
                parent.priority,
                parent.cache_salt,
            )
            child.num_cached_tokens = parent.num_cached_tokens
            child.first_scheduled_time = parent.first_scheduled_time
            group.members.append(child)  # first, so a failed step's recovery finds its blocks
            self._member_group[child.request_id] = group
            self.scheduler.fork_request(parent, child)
            if gens:
                self._gens[child.request_id] = [gens[i]]
            sampled[child.request_id] = [tok]
        sampled[parent_id] = toks[:1]
        if gens:
            self._gens[parent_id] = gens[:1]

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
        for group in self._groups.values():
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
        self._groups.clear()
        self._member_group.clear()
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

    def _check_stop_strings(self, sampled: dict[str, int], finished: list[Request]) -> list[Request]:
        """Stop the requests whose newest token completes a stop string, as vLLM 0.32.0's detokenizer
        (``pagedlab.engine.stop_strings``): also one just finished by its length (its finish reason becomes
        "stop"); only past ``min_tokens``; the string must end in the new token's text. Returns the requests
        this finishes (not those already finished)."""
        just = {r.request_id: r for r in finished}
        done = []
        for rid in sampled:
            req = self.scheduler.requests.get(rid) or just.get(rid)
            if req is None or self.tokenizer is None:
                continue
            sp = req.sampling_params
            if not sp.stop or not sp.detokenize or req.status == RequestStatus.FINISHED_ABORTED:
                continue
            ids = req.output_token_ids
            if len(ids) <= sp.min_tokens or (req.is_finished() and rid not in just):
                continue
            shown = ids[:-1] if _stop_terminated(req) and not sp.include_stop_str_in_output else ids
            text = output_text(self.tokenizer, list(shown), sp.skip_special_tokens)
            before = output_text(self.tokenizer, list(ids[:-1]), sp.skip_special_tokens)
            stops = [sp.stop] if isinstance(sp.stop, str) else list(sp.stop)
            found = check_stop_strings(text, len(text) - len(before), stops, sp.include_stop_str_in_output)
            if found is None:
                continue
            req.stop_reason, req.stop_truncate_to = found
            if req.is_finished():
                req.status = RequestStatus.FINISHED_STOPPED
            else:
                done += self.scheduler.finish_requests(rid, RequestStatus.FINISHED_STOPPED)
        return done

    def _group_of(self, req: Request) -> _Group:
        return self._member_group[req.request_id]

    def _completion(self, index: int, req: Request) -> CompletionOutput:
        sp = req.sampling_params
        text = ""
        if self.tokenizer is not None and sp.detokenize:
            shown = req.output_token_ids
            if _stop_terminated(req) and not sp.include_stop_str_in_output:
                # vLLM 0.32 leaves the EOS or stop token that ended it out of the text (``token_ids`` keep it):
                # ``BaseIncrementalDetokenizer.update(..., stop_terminated)``, v1/engine/detokenizer.py:107
                shown = shown[:-1]
            text = output_text(self.tokenizer, list(shown), sp.skip_special_tokens)
        if isinstance(req.stop_reason, str) and req.stop_truncate_to != -1:
            text = text[: req.stop_truncate_to]  # where check_stop_strings cut it
        lps = self._logprobs.get(req.request_id) if sp.logprobs is not None else None
        cumulative = sum(e[t].logprob for e, t in zip(lps, req.output_token_ids)) if lps is not None else None
        return CompletionOutput(
            index=index,
            text=text,
            token_ids=list(req.output_token_ids),
            cumulative_logprob=cumulative,
            logprobs=None if lps is None else list(lps),
            finish_reason=req.get_finished_reason(),
            stop_reason=req.stop_reason,
        )

    # --- vLLM v1 extras: logprobs, partial outputs, metrics ---------------------------------------
    def _record_logprobs(self, sampled: dict[str, list[int]]) -> None:
        """Append this step's top log-probabilities to each sampling request's list. An ``n > 1``
        parent sampled its completions' first tokens from one row: entry i goes to completion i."""
        for rid, entries in self.model_runner.last_logprobs.items():
            for i, entry in enumerate(entries):
                target = rid if i == 0 else self._member_group[rid].members[i].request_id
                earlier = self._logprobs.setdefault(target, [])
                req = self.scheduler.requests.get(target)
                if self.tokenizer is not None and req is not None and req.sampling_params.detokenize:
                    # vLLM 0.32 decodes each token of the entry (v1/engine/logprobs.py:97-106); the sampled
                    # token comes first in every earlier entry, the context of a split multi-byte character
                    fill_decoded_tokens(self.tokenizer, entry, [next(iter(e)) for e in earlier[-4:]])
                earlier.append(entry)

    def _observe_step(self, out: SchedulerOutput, flat: dict[str, int], now: float) -> None:
        """Feed ``self.stats`` (``get_metrics()``) from one step, before its tokens are appended."""
        self.stats.on_step(sum(s.num_tokens for s in out.scheduled), len(out.preempted))
        for s in out.scheduled:
            r = s.request
            if r.first_scheduled_time is None and self._is_group_head(r.request_id):
                self.stats.on_first_scheduled(r.num_prompt_tokens, r.num_cached_tokens)
        for rid in flat:
            req = self.scheduler.requests.get(rid)
            if req is None:
                continue
            first = req.first_token_time is None and self._is_group_head(rid)
            last = req.token_times[-1] if req.token_times else None
            self.stats.on_token(now - req.arrival_time if first else None, None if last is None else now - last)

    def get_request_group_id(self, member_id: str) -> str | None:
        """The caller's request id that the live member Request ``member_id`` serves: itself for the
        submitted request, its parent's for a fork child of an ``n > 1`` request (vLLM v0's
        ``SequenceGroup.request_id``); None for an id the engine does not track (finished, or a
        beam of ``beam_search``). Ids are never parsed."""
        group = self._member_group.get(member_id)
        return None if group is None else group.request_id

    def _is_group_head(self, member_id: str) -> bool:
        """True for the request a prompt was submitted as (not one of its fork children)."""
        group = self._member_group.get(member_id)
        return group is not None and group.members[0].request_id == member_id

    def _partial_outputs(self, flat: dict[str, int], done: set[str]) -> list[RequestOutput]:
        """Cumulative outputs (``finished=False``) of the requests that got a token this step, but for
        those whose ``output_kind`` is ``FINAL_ONLY``."""
        gids = dict.fromkeys(self._member_group[rid].request_id for rid in flat if rid in self._member_group)
        groups = [self._groups[g] for g in gids if g in self._groups and g not in done]
        return [
            self._request_output(g, finished=False)
            for g in groups
            if g.members[0].sampling_params.output_kind is not RequestOutputKind.FINAL_ONLY
        ]

    def _request_output(self, group: _Group, finished: bool, now: float | None = None) -> RequestOutput:
        first = group.members[0]
        metrics = RequestMetrics(
            arrival_time=group.arrival_time,
            first_scheduled_time=first.first_scheduled_time,
            first_token_time=first.first_token_time,
            last_token_time=first.token_times[-1] if first.token_times else None,
            finished_time=now,
            num_preemptions=sum(m.num_preemptions for m in group.members),
            token_times=list(first.token_times),
        )
        return RequestOutput(
            request_id=group.request_id,
            prompt=group.prompt,
            prompt_token_ids=group.prompt_token_ids,
            prompt_logprobs=None,
            outputs=[self._completion(i, m) for i, m in enumerate(group.members)],
            finished=finished,
            num_cached_tokens=max(first.num_cached_tokens, 0),
            pagedlab_metrics=metrics,
        )

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
        group = self._group_of(req)
        group.finished_members[group.members.index(req)] = req
        if len(group.finished_members) < group.n and req.status != RequestStatus.FINISHED_ABORTED:
            return None
        if len(group.finished_members) < len(group.members):
            return None
        del self._groups[group.request_id]
        out = self._request_output(group, finished=True, now=now)
        for m in group.members:
            self._gens.pop(m.request_id, None)
            self._logprobs.pop(m.request_id, None)
            self._member_group.pop(m.request_id, None)
        self.stats.on_finished(group.members[0].get_finished_reason() or "abort", now - group.arrival_time)
        return out
