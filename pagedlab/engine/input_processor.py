"""Input processing: a prompt and its ``SamplingParams`` checked and turned into token ids and a
``Request``, before any engine state changes.

vLLM 0.32.0 does this in ``InputProcessor.process_inputs`` (``vllm/v1/engine/input_processor.py``):
it tokenizes the prompt, validates the parameters against the model and the engine's limits and
returns the ``EngineCoreRequest`` the engine core queues. Here ``LLMEngine.add_request`` calls
:meth:`InputProcessor.process_inputs` and queues what :meth:`InputProcessor.make_request` builds.
Everything refused raises ``InvalidRequestError`` naming the problem; nothing is queued then.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.errors import InvalidRequestError
from pagedlab.request import BlockHasher, Request
from pagedlab.sampling_params import SamplingParams

if TYPE_CHECKING:
    from pagedlab.model.llama import LlamaConfig


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
            f"got {typed(arrival_time)}"
        )


def typed(value: object) -> str:
    """``"int 7"``: a value with its type's name, for error messages."""
    return f"{type(value).__name__} {value!r}"


def seeded_generators(params: SamplingParams) -> list[torch.Generator] | None:
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


@dataclass
class ProcessedInput:
    """What :meth:`InputProcessor.process_inputs` accepted (vLLM 0.32's ``EngineCoreRequest``, before ids).

    Attributes:
        prompt: the prompt's text, or None for a token-id prompt.
        prompt_token_ids: its token ids.
        params: the request's parameters, ``max_tokens`` resolved (a copy when it was None).
        generators: one seeded generator per completion, or None without a seed.
    """

    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    generators: list[torch.Generator] | None


class InputProcessor:
    """Tokenizes and validates requests for one engine (its model, cache and scheduler settings).

    Args:
        model_config: the model's ``LlamaConfig`` (``vocab_size``).
        cache_config, scheduler_config: the engine's settings (pool size, ``max_model_len`` ...).
        tokenizer: an HF tokenizer (``__call__``) or None (token-id prompts only); the engine's
            ``tokenizer`` setter keeps it in step.
        eos_token_id: the model's EOS id, stored on every ``Request``.
        max_logprobs: most log-probabilities a request may ask for per token (-1: the whole vocabulary).
        parallel_sampling: ``"fork"`` or ``"requests"`` (how an ``n > 1`` request runs: whether its
            n sequences must fit ``max_num_seqs`` together).
        scheduling: ``"continuous"`` or ``"static"``.
    """

    def __init__(
        self,
        model_config: LlamaConfig,
        cache_config: CacheConfig,
        scheduler_config: SchedulerConfig,
        *,
        tokenizer: Any,
        eos_token_id: int | None,
        max_logprobs: int,
        parallel_sampling: str,
        scheduling: str,
    ) -> None:
        self.model_config = model_config
        self.cache_config = cache_config
        self.scheduler_config = scheduler_config
        self.tokenizer = tokenizer
        self.eos_token_id = eos_token_id
        self.max_logprobs = max_logprobs
        self.parallel_sampling = parallel_sampling
        self.scheduling = scheduling

    def process_inputs(
        self, prompt: object, params: SamplingParams | None, arrival_time: float | None, priority: int
    ) -> ProcessedInput:
        """Tokenize ``prompt`` and validate it with ``params`` (default ``SamplingParams()``).

        Raises:
            InvalidRequestError: see :meth:`tokenize` and :meth:`validate_request`; also ``params`` that
                are not ``SamplingParams``, a non-int ``priority``, an ``arrival_time`` that is not a
                finite number, or a seed torch's generator cannot take.
        """
        params = params or SamplingParams()
        if not isinstance(params, SamplingParams):
            raise InvalidRequestError(f"params must be SamplingParams, got {type(params).__name__}")
        check_priority(priority)
        check_arrival_time(arrival_time)
        text, ids = self.tokenize(prompt)
        params = self.resolve_max_tokens(ids, params)
        self.validate_request(ids, params)
        return ProcessedInput(text, ids, params, seeded_generators(params))

    def tokenize(self, prompt: object) -> tuple[str | None, list[int]]:
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

    def make_request(
        self,
        rid: str,
        ids: list[int],
        params: SamplingParams,
        arrival: float,
        priority: int,
        cache_salt: str | None,
        block_hasher: BlockHasher | None,
    ) -> Request:
        """A new ``Request`` with this engine's EOS id and the KV-cache manager's ``block_hasher``."""
        return Request(
            rid,
            ids,
            params,
            arrival_time=arrival,
            priority=priority,
            eos_token_id=self.eos_token_id,
            block_hasher=block_hasher,
            cache_salt=cache_salt,
        )
