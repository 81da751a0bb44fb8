"""Sampling parameters, with the fields and defaults of vLLM's ``SamplingParams``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Union

from pagedlab.errors import InvalidRequestError


@dataclass
class SamplingParams:
    """How to sample the completion(s) of one prompt (as ``vllm.SamplingParams``).

    Attributes:
        n: completions per prompt. ``n > 1`` forks the request and shares its prompt
            blocks copy-on-write (vLLM v0 semantics; v1 fans out through prefix caching).
        temperature: 0 means greedy (argmax); otherwise logits are divided by it.
        top_p: nucleus sampling mass in (0, 1]; 1 disables it.
        top_k: keep the k most likely tokens; 0 or -1 disables it.
        max_tokens: most tokens generated per completion (>= 1).
        seed: per-request random seed; the same seed gives the same sample.
        stop: strings that end the completion; the stop string is not included in the text.
        stop_token_ids: token ids that end the completion besides EOS.
        ignore_eos: keep generating after EOS (benchmarks use it to fix output lengths).

    Raises:
        InvalidRequestError: a field is out of range (checked at construction).
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: List[int] = field(default_factory=list)
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        if not all(isinstance(s, str) for s in self.stop):
            raise InvalidRequestError(f"stop must be a string or a list of strings, got {self.stop!r}")
        if not isinstance(self.stop_token_ids, (list, tuple)) or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in self.stop_token_ids):
            raise InvalidRequestError(f"stop_token_ids must be a list of ints, got {self.stop_token_ids!r}")
        self.stop_token_ids = list(self.stop_token_ids)
        for name in ("temperature", "top_p"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
                raise InvalidRequestError(f"{name} must be a finite number, got {v!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise InvalidRequestError(f"seed must be an int or None, got {self.seed!r}")
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise InvalidRequestError(f"n must be an int >= 1, got {self.n!r}")
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise InvalidRequestError(f"max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if self.temperature < 0:
            raise InvalidRequestError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {self.top_p}")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            raise InvalidRequestError(f"top_k must be -1, 0 (off) or a positive int, got {self.top_k!r}")
        if any(not s for s in self.stop):
            raise InvalidRequestError("stop strings must be non-empty")

    @property
    def greedy(self) -> bool:
        """True when sampling is argmax (temperature 0)."""
        return self.temperature == 0.0
