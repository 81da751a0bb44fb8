"""What ``LLM.generate`` returns, with vLLM's names (``vllm/outputs.py``, vLLM 0.32.0).

``RequestOutput.metrics`` is None, as from vLLM's ``LLM`` (aggregate measurements come from
``LLM.get_metrics()``, as in vLLM); the kit's per-request timestamps and latencies are its own
extension, ``RequestOutput.pagedlab_metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Logprob:
    """As ``vllm.logprobs.Logprob``: one token's log-probability, its rank (1 = most likely) and, when the
    request detokenizes, the token decoded on its own (``decoded_token``, as vLLM 0.32.0's ``LogprobsProcessor``:
    ``pagedlab.engine.decoded_tokens``); None with ``detokenize=False``."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


#: One generated token's entry in ``CompletionOutput.logprobs``: token id -> Logprob (vLLM's shape).
TokenLogprobs = dict[int, Logprob]


@dataclass
class CompletionOutput:
    """One completion of a prompt.

    Attributes:
        index: which of the ``n`` completions this is.
        text: detokenized output (special tokens skipped unless ``skip_special_tokens=False``; the stop string,
            or the EOS / stop token that ended it, left out unless ``include_stop_str_in_output``).
        token_ids: generated token ids (EOS or the stop token included when it ended the completion).
        cumulative_logprob: sum of the sampled tokens' log-probabilities when
            ``SamplingParams.logprobs`` is set, else None (as vLLM).
        logprobs: with ``SamplingParams.logprobs=k``: per generated token, token id -> ``Logprob``
            for the sampled token and the k most likely ones; else None.
        finish_reason: "stop" (EOS or a stop string/token), "length" (max_tokens or
            max_model_len), "abort", or None while unfinished.
        stop_reason: the stop string or token id that ended it, if any.
    """

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None = None
    logprobs: list[TokenLogprobs] | None = None
    finish_reason: str | None = None
    stop_reason: object | None = None

    def finished(self) -> bool:
        """True once the completion has a ``finish_reason`` (as vLLM)."""
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Timestamps in seconds (engine clock ``time.perf_counter``) and derived latencies."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None
    num_preemptions: int = 0
    token_times: list[float] = field(default_factory=list)

    @property
    def ttft(self) -> float | None:
        """Time to first token (s), from arrival."""
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first (s); None with fewer than two tokens."""
        if len(self.token_times) < 2:
            return None
        return (self.token_times[-1] - self.token_times[0]) / (len(self.token_times) - 1)

    @property
    def inter_token_latencies(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:])]

    @property
    def e2e_latency(self) -> float | None:
        return None if self.finished_time is None else self.finished_time - self.arrival_time


@dataclass
class RequestOutput:
    """The output of one request (all ``n`` completions of one prompt), as vLLM's.

    Attributes:
        request_id, prompt (text, or the rendered chat template; None for token-id prompts),
        prompt_token_ids, outputs: as vLLM.
        prompt_logprobs: always None (prompt log-probabilities are not implemented).
        finished: True when every completion has finished; ``LLMEngine.step()`` also returns
            unfinished requests' outputs so far (vLLM v1's cumulative outputs).
        metrics: None, as vLLM's ``LLM`` returns; use ``LLM.get_metrics()`` (portable).
        num_cached_tokens: prompt tokens served from the prefix cache.
        pagedlab_metrics: pagedlab's extension: this request's timestamps and latencies.
    """

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: None
    outputs: list[CompletionOutput]
    finished: bool
    metrics: None = None
    num_cached_tokens: int = 0
    pagedlab_metrics: RequestMetrics | None = None
