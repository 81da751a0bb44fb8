"""What ``LLM.generate`` returns, with vLLM's names (``vllm/outputs.py``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class CompletionOutput:
    """One completion of a prompt.

    Attributes:
        index: which of the ``n`` completions this is.
        text: detokenized output (special tokens skipped, stop string removed).
        token_ids: generated token ids (EOS included when it ended the completion).
        finish_reason: "stop" (EOS or a stop string/token), "length" (max_tokens or
            max_model_len), "abort", or None while unfinished.
        stop_reason: the stop string or token id that ended it, if any.
    """

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float] = None
    logprobs: Optional[list] = None
    finish_reason: Optional[str] = None
    stop_reason: Optional[object] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Timestamps in seconds (engine clock ``time.perf_counter``) and derived latencies."""

    arrival_time: float
    first_scheduled_time: Optional[float] = None
    first_token_time: Optional[float] = None
    last_token_time: Optional[float] = None
    finished_time: Optional[float] = None
    num_preemptions: int = 0
    token_times: List[float] = field(default_factory=list)

    @property
    def ttft(self) -> Optional[float]:
        """Time to first token (s), from arrival."""
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def tpot(self) -> Optional[float]:
        """Time per output token after the first (s); None with fewer than two tokens."""
        if len(self.token_times) < 2:
            return None
        return (self.token_times[-1] - self.token_times[0]) / (len(self.token_times) - 1)

    @property
    def inter_token_latencies(self) -> List[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:])]

    @property
    def e2e_latency(self) -> Optional[float]:
        return None if self.finished_time is None else self.finished_time - self.arrival_time


@dataclass
class RequestOutput:
    """The output of one request (all ``n`` completions of one prompt)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool
    metrics: Optional[RequestMetrics] = None
    num_cached_tokens: int = 0
