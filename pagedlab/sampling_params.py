"""Sampling parameters, with the fields, defaults and validation of vLLM's ``SamplingParams``.

Described against vLLM 0.32.0's ``vllm/sampling_params.py``, the release the kit follows
(``pagedlab.vllm_version``; read 2026-12-07 in the installed wheel). Fields vLLM has that the kit does not
implement (``prompt_logprobs``, ``logit_bias``, ``allowed_token_ids``, ``bad_words``, ``structured_outputs``
...) are not accepted: passing one raises ``TypeError`` naming it, rather than being silently ignored.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from enum import Enum

from pagedlab.errors import InvalidRequestError

#: vLLM's ``_SAMPLING_EPS``: a temperature below it is greedy sampling.
SAMPLING_EPS = 1e-5
#: vLLM's ``_MAX_TEMP``: a temperature in (0, 1e-2) is raised to 1e-2 with a warning (as vLLM),
#: because dividing logits by a tinier number overflows to inf/nan.
MIN_TEMPERATURE = 1e-2


class RequestOutputKind(Enum):
    """Which ``RequestOutput`` objects ``LLMEngine.step()`` returns for a running request (vLLM's
    ``RequestOutputKind``, ``vllm/sampling_params.py``, vLLM >= 0.6.2)."""

    #: After every step that gave it a token: the completion so far (the default).
    CUMULATIVE = 0
    #: vLLM: only what is new since the previous output. Not implemented in pagedlab: refused.
    DELTA = 1
    #: Nothing until the request finishes. ``LLM.generate``/``chat`` ask for this, as vLLM's ``LLM`` does
    #: (it only returns finished outputs, so building the others every step would be wasted work).
    FINAL_ONLY = 2


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_number(name: str, v: object) -> float:
    """Return ``v`` as a float; raise InvalidRequestError unless it is a finite real number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InvalidRequestError(f"{name} must be a finite number, got {v!r}")
    return float(v)


def _check_bool(name: str, v: object) -> None:
    if not isinstance(v, bool):
        raise InvalidRequestError(f"{name} must be True or False, got {v!r}")


@dataclass
class SamplingParams:
    """How to sample the completion(s) of one prompt (as ``vllm.SamplingParams``, vLLM 0.32.0).

    Attributes:
        n: completions per prompt (int >= 1). ``n > 1`` forks the request and shares its prompt
            blocks copy-on-write (vLLM v0 semantics); with the engine's ``parallel_sampling="requests"``
            it fans out into n requests sharing the prompt through prefix caching, as vLLM v1.
        presence_penalty: in [-2, 2]; subtracted from the logit of every token already generated.
        frequency_penalty: in [-2, 2]; subtracted once per earlier occurrence in the output.
        repetition_penalty: > 0; logits of tokens in the prompt or output are divided by it when
            positive and multiplied by it when negative (1 = off).
        temperature: >= 0; 0 is greedy (argmax). Values in (0, 1e-2) are raised to 1e-2 with a
            warning, as vLLM does.
        top_p: nucleus mass in (0, 1]; 1 disables it.
        top_k: keep the k most likely tokens; 0 or -1 disables it.
        min_p: in [0, 1]; drop tokens whose probability is below ``min_p`` x the top one's.
        seed: per-request seed; None or -1 (vLLM's "no seed") use the engine's generator.
        stop: string(s) that end the completion; not in the text unless
            ``include_stop_str_in_output``. Needs ``detokenize=True`` (else refused, as vLLM 0.32.0).
        stop_token_ids: token ids that end the completion besides EOS (None = none); ids outside the
            vocabulary are refused when the request is added (as vLLM 0.32.0). The token that ends a
            completion (EOS or one of these) stays in ``token_ids`` but not in the text unless
            ``include_stop_str_in_output``, as vLLM 0.32.0's detokenizer.
        ignore_eos: keep generating after EOS (benchmarks use it to fix output lengths).
        max_tokens: most tokens per completion (>= 1), or None: up to ``max_model_len``.
        min_tokens: tokens generated before EOS or ``stop_token_ids`` may be (0 <= it <= max_tokens).
        logprobs: None, or how many top log-probabilities to return per generated token (>= 0;
            the sampled token's is always included; -1 means the whole vocabulary).
        detokenize: False leaves ``CompletionOutput.text`` empty (token ids only).
        skip_special_tokens: drop special tokens (EOS ...) from the text.
        spaces_between_special_tokens: accepted for vLLM compatibility (the SmolLM2 tokenizer
            decodes the same either way).
        include_stop_str_in_output: keep the matched stop string at the end of the text.
        output_kind: :class:`RequestOutputKind` ``CUMULATIVE`` (default) or ``FINAL_ONLY``; ``DELTA``
            is refused (not implemented).

    Raises:
        InvalidRequestError: a field has the wrong type or is out of range (checked at construction).
    """

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE

    def __post_init__(self) -> None:
        self._normalize_lists()
        self._check_output_kind()
        for name in ("presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "min_p"):
            setattr(self, name, _check_number(name, getattr(self, name)))
        for name in (
            "ignore_eos",
            "detokenize",
            "skip_special_tokens",
            "spaces_between_special_tokens",
            "include_stop_str_in_output",
        ):
            _check_bool(name, getattr(self, name))
        if self.seed is not None and not _is_int(self.seed):
            raise InvalidRequestError(f"seed must be an int or None, got {self.seed!r}")
        if self.seed == -1:
            self.seed = None
        if self.logprobs is True:  # vLLM: logprobs=True means 1
            self.logprobs = 1
        self._verify_counts()
        self._verify_ranges()
        if self.stop and not self.detokenize:  # vLLM 0.32's _verify_args (sampling_params.py:734)
            raise InvalidRequestError(
                "stop strings are only supported when detokenize is True. Set detokenize=True to use stop."
            )
        if 0 < self.temperature < MIN_TEMPERATURE:
            warnings.warn(
                f"temperature {self.temperature} is less than {MIN_TEMPERATURE}, which may cause "
                f"numerical errors nan or inf; raised to {MIN_TEMPERATURE} (as vLLM)",
                stacklevel=3,
            )
            self.temperature = MIN_TEMPERATURE
        if self.temperature < SAMPLING_EPS:  # greedy: the filters mean nothing (as vLLM)
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0

    def _normalize_lists(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.stop is not None and not isinstance(self.stop, (list, tuple)):
            raise InvalidRequestError(f"stop must be a string or a list of strings, got {self.stop!r}")
        self.stop = list(self.stop or [])
        if not all(isinstance(s, str) and s for s in self.stop):
            raise InvalidRequestError(f"stop must be non-empty strings, got {self.stop!r}")
        ids = [] if self.stop_token_ids is None else self.stop_token_ids
        if not isinstance(ids, (list, tuple)) or not all(_is_int(t) and t >= 0 for t in ids):
            raise InvalidRequestError(
                f"stop_token_ids must be a list of token ids (ints >= 0) or None, got {self.stop_token_ids!r}"
            )
        self.stop_token_ids = list(dict.fromkeys(ids))

    def _verify_counts(self) -> None:
        if not _is_int(self.n) or self.n < 1:
            raise InvalidRequestError(f"n must be an int >= 1, got {self.n!r}")
        if self.max_tokens is not None and (not _is_int(self.max_tokens) or self.max_tokens < 1):
            raise InvalidRequestError(f"max_tokens must be at least 1 (or None), got {self.max_tokens!r}")
        if not _is_int(self.min_tokens) or self.min_tokens < 0:
            raise InvalidRequestError(f"min_tokens must be an int >= 0, got {self.min_tokens!r}")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise InvalidRequestError(
                f"min_tokens must be less than or equal to max_tokens={self.max_tokens}, got {self.min_tokens}"
            )
        if not _is_int(self.top_k) or self.top_k < -1:
            raise InvalidRequestError(f"top_k must be 0 or -1 (disable), or at least 1, got {self.top_k!r}")
        if self.top_k == -1:
            self.top_k = 0
        if self.logprobs is not None and (not _is_int(self.logprobs) or self.logprobs < -1):
            raise InvalidRequestError(
                f"logprobs must be None, -1 (whole vocabulary) or an int >= 0, got {self.logprobs!r}"
            )

    def _verify_ranges(self) -> None:
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2.0 <= getattr(self, name) <= 2.0:
                raise InvalidRequestError(f"{name} must be in [-2, 2], got {getattr(self, name)}")
        if self.repetition_penalty <= 0.0:
            raise InvalidRequestError(f"repetition_penalty must be greater than zero, got {self.repetition_penalty}")
        if self.temperature < 0.0:
            raise InvalidRequestError(f"temperature must be non-negative, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise InvalidRequestError(f"min_p must be in [0, 1], got {self.min_p}")

    def _check_output_kind(self) -> None:
        if not isinstance(self.output_kind, RequestOutputKind):
            raise InvalidRequestError(f"output_kind must be a RequestOutputKind, got {self.output_kind!r}")
        if self.output_kind is RequestOutputKind.DELTA:
            raise InvalidRequestError(
                "output_kind=RequestOutputKind.DELTA (only the new tokens in each output) is not implemented in "
                "pagedlab; use CUMULATIVE (the default: each output holds the completion so far) or FINAL_ONLY"
            )

    @property
    def greedy(self) -> bool:
        """True when sampling is argmax (temperature below ``SAMPLING_EPS``, i.e. 0)."""
        return self.temperature < SAMPLING_EPS

    @property
    def needs_penalties(self) -> bool:
        """True when any of the three penalties changes the logits."""
        return self.presence_penalty != 0.0 or self.frequency_penalty != 0.0 or self.repetition_penalty != 1.0


@dataclass
class BeamSearchParams:
    """As ``vllm.sampling_params.BeamSearchParams`` (vLLM 0.32.0).

    Attributes:
        beam_width: beams kept per step (>= 1).
        max_tokens: most tokens generated per beam (>= 1).
        ignore_eos: keep beams going past EOS.
        temperature: vLLM's field; only 0 (pure log-probability ranking) is implemented here.
        length_penalty: finished beams rank by ``cum_logprob / len ** length_penalty``.
        include_stop_str_in_output: accepted for vLLM compatibility (beams stop only at EOS).

    Raises:
        InvalidRequestError: ``beam_width < 1``, ``max_tokens < 1`` or ``temperature != 0``.
    """

    beam_width: int
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 0.0
    length_penalty: float = 1.0
    include_stop_str_in_output: bool = False

    def __post_init__(self) -> None:
        if not _is_int(self.beam_width) or self.beam_width < 1:
            raise InvalidRequestError(f"beam_width must be an int >= 1, got {self.beam_width!r}")
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise InvalidRequestError(f"max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if _check_number("temperature", self.temperature) != 0.0:
            raise InvalidRequestError(
                "BeamSearchParams.temperature: only 0 is implemented by pagedlab's "
                f"copy-on-write beam search, got {self.temperature}"
            )
        _check_number("length_penalty", self.length_penalty)
