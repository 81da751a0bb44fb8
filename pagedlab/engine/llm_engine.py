"""The serving loop: ``add_request`` / ``step`` / ``abort_request``, as vLLM's ``LLMEngine``.

One ``step()`` = the scheduler picks requests and token counts (allocating KV blocks), the
model runner computes them in one flat batch and samples, and the scheduler appends the
tokens and frees finished requests. ``LLM`` (``pagedlab.engine.llm``) drives this loop.
"""
from __future__ import annotations

import functools
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.errors import ConfigError, InvalidRequestError
from pagedlab.kernels.backends import BACKENDS, default_backend
from pagedlab.outputs import CompletionOutput, RequestMetrics, RequestOutput
from pagedlab.sampling_params import SamplingParams
from pagedlab.request import Request, RequestStatus
from pagedlab.sched.scheduler import Scheduler


@functools.lru_cache(maxsize=4)
def _load_cached(path: str):
    from pagedlab.model.loader import load_model
    return load_model(path)


def load_model_cached(model=None):
    """``load_model`` memoised per resolved path, so many engines share one set of weights."""
    from pagedlab.model.loader import resolve_model_path
    return _load_cached(str(resolve_model_path(model)))


@dataclass
class StepStats:
    """What one step did (plain data, for tables, plots and widgets)."""

    step: int
    scheduled: List[tuple]            # (request_id, num_tokens, is_prefill)
    num_prefill_tokens: int
    num_decode_tokens: int
    preempted: List[str]
    kv_blocks_used: int
    kv_blocks_free: int
    step_time: float                  # seconds, whole step
    sched_time: float = 0.0           # seconds in scheduler + KV-cache manager (schedule + update)
    running: int = 0
    waiting: int = 0
    swapped: int = 0


@dataclass
class _Group:
    """The ``n`` completions of one prompt (vLLM v0's SequenceGroup)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    n: int
    arrival_time: float
    members: List[Request] = field(default_factory=list)
    finished_members: Dict[int, Request] = field(default_factory=dict)


class LLMEngine:
    """A paged-KV-cache serving engine for Llama models on CPU (or CUDA).

    Args:
        model: GGUF path, directory, or None for SmolLM2-135M-Instruct.
        block_size, num_gpu_blocks, num_cpu_blocks, enable_prefix_caching, prefix_cache,
        hash_seed: see ``CacheConfig``.
        max_num_seqs, max_num_batched_tokens, max_model_len, long_prefill_token_threshold,
        enable_chunked_prefill, policy, preemption_mode: see ``SchedulerConfig``.
        scheduling: ``"continuous"`` (iteration-level) or ``"static"`` (baseline).
        attention_backend: ``"torch"`` (reference), ``"triton"`` or ``"cpu"``; default
            ``pagedlab.kernels.backends.default_backend(device)``: triton on CUDA, cpu on a CPU.
        seed: seed of the engine's sampling RNG (requests without their own seed).
        trace: record memory/scheduler events (``engine.tracer``) for widgets.
        tokenizer, eos_token_id: only with ``model`` given as a ``LlamaForCausalLM`` instance.
    Raises:
        ConfigError: a setting is invalid. ModelNotFoundError / ModelFileCorruptError.
    """

    def __init__(self, model=None, *, block_size: int = 16, num_gpu_blocks: int = 512,
                 num_cpu_blocks: int = 0, enable_prefix_caching: bool = False, prefix_cache: str = "hash",
                 hash_seed: Optional[int] = None, max_num_seqs: int = 32, max_num_batched_tokens: int = 512,
                 max_model_len: Optional[int] = None, long_prefill_token_threshold: int = 0,
                 enable_chunked_prefill: bool = True, policy: str = "fcfs", preemption_mode: str = "recompute",
                 scheduling: str = "continuous", attention_backend: Optional[str] = None,
                 device: Optional[str] = None, seed: int = 0, trace: bool = False,
                 tokenizer=None, eos_token_id: Optional[int] = None) -> None:
        self.cache_config = CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks,
                                        num_cpu_blocks=num_cpu_blocks, enable_prefix_caching=enable_prefix_caching,
                                        prefix_cache=prefix_cache, hash_seed=hash_seed)
        if isinstance(model, torch.nn.Module):
            # An already-built LlamaForCausalLM (tests use tiny random-weight models); prompts
            # must then be token ids unless a tokenizer is given.
            net, self.tokenizer, meta = model, tokenizer, {"eos_token_id": eos_token_id}
        else:
            net, self.tokenizer, meta = load_model_cached(model)
        self.model_config = net.config
        if max_model_len is None:
            max_model_len = min(2048, net.config.max_position_embeddings)
        if max_model_len > net.config.max_position_embeddings:
            raise ConfigError(f"max_model_len={max_model_len} exceeds the model's "
                              f"{net.config.max_position_embeddings} positions")
        self.scheduler_config = SchedulerConfig(
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
            long_prefill_token_threshold=long_prefill_token_threshold, enable_chunked_prefill=enable_chunked_prefill,
            policy=policy, preemption_mode=preemption_mode)
        if preemption_mode == "swap" and num_cpu_blocks == 0:
            raise ConfigError("preemption_mode='swap' needs num_cpu_blocks > 0 (the swap space)")
        if scheduling not in ("continuous", "static"):
            raise ConfigError(f"scheduling must be 'continuous' or 'static', got {scheduling!r}")
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if attention_backend is None:
            attention_backend = default_backend(device)
        if attention_backend not in BACKENDS:
            raise ConfigError(f"attention_backend must be one of {', '.join(map(repr, BACKENDS))}, "
                              f"got {attention_backend!r}")
        self.eos_token_id = meta["eos_token_id"]

        from pagedlab.core.kv_cache_manager import KVCacheManager
        from pagedlab.engine.model_runner import ModelRunner
        self.tracer = None
        if trace:
            from pagedlab.trace import Tracer
            self.tracer = Tracer()
        self.kv_cache_manager = KVCacheManager(
            block_size=block_size, num_gpu_blocks=num_gpu_blocks, max_model_len=max_model_len,
            enable_caching=enable_prefix_caching, prefix_cache=prefix_cache, num_cpu_blocks=num_cpu_blocks,
            hash_seed=hash_seed, tracer=self.tracer)
        if scheduling == "static":
            from pagedlab.sched.static import StaticScheduler as scheduler_cls
        else:
            scheduler_cls = Scheduler
        self.scheduler = scheduler_cls(self.scheduler_config, self.cache_config, self.kv_cache_manager,
                                       tracer=self.tracer)
        self.model_runner = ModelRunner(net.to(device), block_size, num_gpu_blocks, num_cpu_blocks,
                                        attention_backend=attention_backend, device=device)
        self.generator = torch.Generator().manual_seed(seed)
        self._groups: Dict[str, _Group] = {}
        # Seeded requests only: the generators of the request's next sample, always a list - the
        # prompt's n generators until an n > 1 prompt forks, then one per completion.
        self._gens: Dict[str, List[torch.Generator]] = {}
        self._ids = itertools.count()
        self.step_stats: List[StepStats] = []
        self.finished_requests: List[Request] = []

    # --- submission ----------------------------------------------------------------------------
    def _tokenize(self, prompt) -> tuple:
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                return prompt.get("prompt"), list(prompt["prompt_token_ids"])
            prompt = prompt.get("prompt")
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise InvalidRequestError("this engine has no tokenizer: pass token ids")
            return prompt, self.tokenizer(prompt)["input_ids"]
        if isinstance(prompt, (list, tuple)) and all(isinstance(t, int) for t in prompt):
            return None, list(prompt)
        raise InvalidRequestError(f"a prompt must be a str, a list of token ids or a dict, got {type(prompt).__name__}")

    def validate_request(self, prompt_token_ids: List[int], params: SamplingParams) -> None:
        """Check a request before it touches any engine state.

        Raises:
            InvalidRequestError: empty prompt, prompt of ``max_model_len`` tokens or more, token ids
                outside the vocabulary, or a request that can never fit in the whole KV pool.
        """
        n_prompt = len(prompt_token_ids)
        if n_prompt == 0:
            raise InvalidRequestError("the prompt is empty: it must have at least one token")
        vocab = self.model_config.vocab_size
        bad = [t for t in prompt_token_ids if not 0 <= t < vocab]
        if bad:
            raise InvalidRequestError(f"prompt token ids {bad[:5]} are outside the vocabulary [0, {vocab})")
        max_len = self.scheduler_config.max_model_len
        if n_prompt >= max_len:
            raise InvalidRequestError(
                f"the prompt has {n_prompt} tokens, which leaves no room to generate within "
                f"max_model_len={max_len}; shorten the prompt or raise max_model_len")
        bs, pool = self.cache_config.block_size, self.cache_config.num_gpu_blocks
        need = -(-min(n_prompt + params.max_tokens, max_len) // bs) * params.n
        if need > pool:
            raise InvalidRequestError(
                f"this request needs up to {need} KV blocks ({n_prompt} prompt + {params.max_tokens} output tokens, "
                f"n={params.n}, block_size={bs}) but the whole pool has num_gpu_blocks={pool}; it could never "
                f"run. Lower max_tokens or raise num_gpu_blocks")

    def add_request(self, request_id: Optional[str], prompt, params: Optional[SamplingParams] = None,
                    arrival_time: Optional[float] = None, priority: int = 0, cache_salt: Optional[str] = None) -> str:
        """Validate and queue a request; returns its id.

        Args:
            prompt: text (tokenized without the chat template), token ids, or
                ``{"prompt_token_ids": [...]}``.
            priority: int, lower is served first under ``policy="priority"``.
        Raises:
            InvalidRequestError: see ``validate_request``; also a duplicate id or a non-int priority.
        """
        params = params or SamplingParams()
        if not isinstance(params, SamplingParams):
            raise InvalidRequestError(f"params must be SamplingParams, got {type(params).__name__}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidRequestError(f"priority must be an int, got {type(priority).__name__}")
        request_id = str(next(self._ids)) if request_id is None else str(request_id)
        if request_id in self._groups:
            raise InvalidRequestError(f"request id {request_id!r} is already in use")
        text, ids = self._tokenize(prompt)
        self.validate_request(ids, params)
        now = time.perf_counter() if arrival_time is None else arrival_time
        req = self._make_request(request_id, ids, params, now, priority, cache_salt)
        if params.seed is not None:
            self._gens[request_id] = [torch.Generator().manual_seed(params.seed + i) for i in range(params.n)]
        self._groups[request_id] = _Group(request_id, text, ids, params.n, now, [req])
        self.scheduler.add_request(req)
        return request_id

    def _make_request(self, rid, ids, params, arrival, priority=0, cache_salt=None) -> Request:
        return Request(rid, ids, params, arrival_time=arrival, priority=priority, eos_token_id=self.eos_token_id,
                       block_hasher=self.kv_cache_manager.block_hasher, cache_salt=cache_salt)

    def abort_request(self, request_id: str) -> None:
        """Abort a waiting, running or swapped request (and all its completions); frees its blocks."""
        group = self._groups.get(request_id)
        if group is None:
            return
        ids = [m.request_id for m in group.members]
        for r in self.scheduler.finish_requests(ids, RequestStatus.FINISHED_ABORTED):
            self._on_finished(r, time.perf_counter())

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    # --- the step --------------------------------------------------------------------------------
    def step(self) -> List[RequestOutput]:
        """Schedule, execute and sample one iteration.

        Returns:
            ``RequestOutput`` for each prompt whose completions all finished in this step.
        """
        t0 = time.perf_counter()
        out = self.scheduler.schedule()
        t_sched = time.perf_counter() - t0
        block_ids = {s.request.request_id: self.kv_cache_manager.get_block_ids(s.request.request_id)
                     for s in out.scheduled}
        # An n>1 prompt samples all its first tokens from the prompt's last row, then forks.
        extra, gens = {}, {}
        for s in out.scheduled:
            rid = s.request.request_id
            g = self._groups.get(rid)
            first = g is not None and s.samples and s.request.num_output_tokens == 0 and len(g.members) == 1
            if first and g.n > 1:
                extra[rid] = g.n
            own = self._gens.get(rid)
            gens[rid] = (own if first and g.n > 1 else own[0]) if own else self.generator
        sampled = self.model_runner.execute(out, block_ids, extra, gens)
        now = time.perf_counter()
        for rid, toks in list(sampled.items()):
            if len(toks) > 1:
                self._fork(rid, toks, sampled)
        flat = {rid: toks[0] for rid, toks in sampled.items()}
        for s in out.scheduled:
            r = s.request
            if r.first_scheduled_time is None:
                r.first_scheduled_time = t0
            if r.request_id in flat and r.first_token_time is None:
                r.first_token_time = now
        t1 = time.perf_counter()
        finished = self.scheduler.update_from_output(out, flat, now)
        t_sched += time.perf_counter() - t1
        finished += self._check_stop_strings(flat)
        outputs = []
        for r in finished:
            o = self._on_finished(r, now)
            if o is not None:
                outputs.append(o)
        kv = self.kv_cache_manager
        self.step_stats.append(StepStats(
            step=out.step,
            scheduled=[(s.request.request_id, s.num_tokens, s.is_prefill) for s in out.scheduled],
            num_prefill_tokens=sum(s.num_tokens for s in out.scheduled if s.is_prefill),
            num_decode_tokens=sum(s.num_tokens for s in out.scheduled if not s.is_prefill),
            preempted=list(out.preempted), kv_blocks_used=self.cache_config.num_gpu_blocks - kv.num_free_blocks,
            kv_blocks_free=kv.num_free_blocks, step_time=time.perf_counter() - t0, sched_time=t_sched,
            running=len(self.scheduler.running), waiting=len(self.scheduler.waiting),
            swapped=len(self.scheduler.swapped)))
        return outputs

    def _fork(self, parent_id: str, toks: List[int], sampled: Dict[str, List[int]]) -> None:
        """Create completions 1..n-1 sharing the parent's blocks copy-on-write (vLLM v0 fork)."""
        parent = self.scheduler.requests[parent_id]
        group = self._groups[parent_id]
        gens = self._gens.get(parent_id)
        for i, tok in enumerate(toks[1:], start=1):
            child = self._make_request(f"{parent_id}#{i}", parent.prompt_token_ids, parent.sampling_params,
                                       parent.arrival_time, parent.priority, parent.cache_salt)
            child.num_computed_tokens = parent.num_computed_tokens
            child.num_cached_tokens = parent.num_cached_tokens
            child.first_scheduled_time = parent.first_scheduled_time
            self.kv_cache_manager.fork(parent, child)
            self.scheduler.add_running_request(child)
            group.members.append(child)
            if gens:
                self._gens[child.request_id] = [gens[i]]
            sampled[child.request_id] = [tok]
        sampled[parent_id] = toks[:1]
        if gens:
            self._gens[parent_id] = gens[:1]

    def _check_stop_strings(self, sampled: Dict[str, int]) -> List[Request]:
        done = []
        for rid in sampled:
            req = self.scheduler.requests.get(rid)
            if req is None or not req.sampling_params.stop or req.is_finished():
                continue
            text = self.tokenizer.decode(req.output_token_ids, skip_special_tokens=True)
            for s in req.sampling_params.stop:
                if s in text:
                    req.stop_reason = s
                    done += self.scheduler.finish_requests(rid, RequestStatus.FINISHED_STOPPED)
                    break
        return done

    def _group_of(self, req: Request) -> _Group:
        return self._groups[req.request_id.split("#")[0]]

    def _completion(self, index: int, req: Request) -> CompletionOutput:
        text = (self.tokenizer.decode(req.output_token_ids, skip_special_tokens=True)
                if self.tokenizer is not None else "")
        if isinstance(req.stop_reason, str) and req.stop_reason in text:
            text = text[:text.index(req.stop_reason)]
        return CompletionOutput(index=index, text=text, token_ids=list(req.output_token_ids),
                                finish_reason=req.get_finished_reason(), stop_reason=req.stop_reason)

    def _on_finished(self, req: Request, now: float) -> Optional[RequestOutput]:
        req.finished_time = now
        self.finished_requests.append(req)
        group = self._group_of(req)
        group.finished_members[group.members.index(req)] = req
        if len(group.finished_members) < group.n and req.status != RequestStatus.FINISHED_ABORTED:
            return None
        if len(group.finished_members) < len(group.members):
            return None
        del self._groups[group.request_id]
        for m in group.members:
            self._gens.pop(m.request_id, None)
        first = group.members[0]
        metrics = RequestMetrics(arrival_time=group.arrival_time, first_scheduled_time=first.first_scheduled_time,
                                 first_token_time=first.first_token_time,
                                 last_token_time=first.token_times[-1] if first.token_times else None,
                                 finished_time=now, num_preemptions=sum(m.num_preemptions for m in group.members),
                                 token_times=list(first.token_times))
        return RequestOutput(request_id=group.request_id, prompt=group.prompt, prompt_token_ids=group.prompt_token_ids,
                             outputs=[self._completion(i, m) for i, m in enumerate(group.members)],
                             finished=True, metrics=metrics, num_cached_tokens=max(first.num_cached_tokens, 0))
