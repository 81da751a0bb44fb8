"""``LLM.get_metrics()``: the engine's counters as vLLM's metric objects (``vllm/v1/metrics/reader.py``).

vLLM (main, read 2026-12-01) keeps Prometheus collectors and ``get_metrics()`` reads them back as ``Counter``,
``Gauge``, ``Histogram`` and ``Vector`` dataclasses named ``vllm:...``. pagedlab has no Prometheus:
``EngineStats`` records the same quantities in plain Python and ``snapshot()`` returns them in
vLLM's classes, names, label keys (``model_name``, ``engine``) and bucket format (cumulative
counts keyed by the upper bound as a string, ``"+Inf"`` last). Under ``python -m
pagedlab.vllm_compat`` this module is what ``vllm.v1.metrics.reader`` resolves to.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass
class Metric:
    """A base class for metrics: a name (``vllm:...``) and key=value labels (as vLLM)."""

    name: str
    labels: dict[str, str]


@dataclass
class Counter(Metric):
    """A monotonically increasing integer counter."""

    value: int


@dataclass
class Vector(Metric):
    """An ordered array of integer counters (vLLM uses it for speculative decoding only)."""

    values: list[int]


@dataclass
class Gauge(Metric):
    """A numerical value that can go up or down."""

    value: float


@dataclass
class Histogram(Metric):
    """Observations in buckets: ``buckets[le]`` counts observations <= ``le`` (cumulative, as
    Prometheus); ``buckets["+Inf"] == count``; ``sum`` is the sum of all observations."""

    count: int
    sum: float
    buckets: dict[str, int]


# vLLM's bucket bounds (22 for TTFT, 19 per token, 21 for e2e) (``vllm/v1/metrics/loggers.py``), in seconds or tokens.
# fmt: off
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0
)
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0
)
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0
)
# fmt: on
TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


@dataclass
class _Hist:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def export(self, name: str, labels: dict[str, str]) -> Histogram:
        counts = self.counts or [0] * (len(self.bounds) + 1)
        buckets, running = {}, 0
        for bound, c in zip([*(repr(float(b)) for b in self.bounds), "+Inf"], counts):
            running += c
            buckets[bound] = running
        return Histogram(name=name, labels=dict(labels), count=running, sum=self.total, buckets=buckets)


@dataclass
class EngineStats:
    """What ``LLMEngine`` counts for ``get_metrics()``; the engine calls the ``on_*`` methods."""

    #: ``vllm:prompt_tokens``: prompt tokens of the requests scheduled so far (cached ones included).
    prompt_tokens: int = 0
    #: ``vllm:generation_tokens``: tokens sampled, all requests together.
    generation_tokens: int = 0
    #: ``vllm:num_preemptions``: requests preempted (one request preempted twice counts 2).
    num_preemptions: int = 0
    #: ``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits``: prompt tokens looked up in the
    #: prefix cache at each request's first scheduling, and how many of them were found there.
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    #: ``vllm:request_success``: finished requests per ``finish_reason`` (``"stop"``, ``"length"`` ...).
    request_success: dict[str, int] = field(default_factory=dict)
    ttft: _Hist = field(default_factory=lambda: _Hist(TTFT_BUCKETS))
    itl: _Hist = field(default_factory=lambda: _Hist(ITL_BUCKETS))
    e2e: _Hist = field(default_factory=lambda: _Hist(E2E_BUCKETS))
    iteration_tokens: _Hist = field(default_factory=lambda: _Hist(TOKEN_BUCKETS))

    def on_first_scheduled(self, num_prompt_tokens: int, num_cached_tokens: int) -> None:
        """A request's first scheduling: one prefix-cache query of its prompt (tokens, as vLLM)."""
        self.prompt_tokens += num_prompt_tokens
        self.prefix_cache_queries += num_prompt_tokens
        self.prefix_cache_hits += max(num_cached_tokens, 0)

    def on_token(self, since_arrival: float | None, since_last_token: float | None) -> None:
        """One generated token: its TTFT (first token) or its inter-token latency (s)."""
        self.generation_tokens += 1
        if since_arrival is not None:
            self.ttft.observe(since_arrival)
        if since_last_token is not None:
            self.itl.observe(since_last_token)

    def on_step(self, num_scheduled_tokens: int, num_preempted: int) -> None:
        self.iteration_tokens.observe(num_scheduled_tokens)
        self.num_preemptions += num_preempted

    def on_finished(self, finish_reason: str, e2e_latency: float) -> None:
        self.request_success[finish_reason] = self.request_success.get(finish_reason, 0) + 1
        self.e2e.observe(e2e_latency)

    def snapshot(self, labels: dict[str, str], running: int, waiting: int, kv_usage: float) -> list[Metric]:
        """vLLM's metric objects for the current state (gauges) and everything counted so far."""
        gauges: list[Metric] = [
            Gauge("vllm:num_requests_running", dict(labels), float(running)),
            Gauge("vllm:num_requests_waiting", dict(labels), float(waiting)),
            Gauge("vllm:kv_cache_usage_perc", dict(labels), float(kv_usage)),
        ]
        counters: list[Metric] = [
            Counter("vllm:num_preemptions", dict(labels), self.num_preemptions),
            Counter("vllm:prompt_tokens", dict(labels), self.prompt_tokens),
            Counter("vllm:generation_tokens", dict(labels), self.generation_tokens),
            Counter("vllm:prefix_cache_queries", dict(labels), self.prefix_cache_queries),
            Counter("vllm:prefix_cache_hits", dict(labels), self.prefix_cache_hits),
        ]
        counters += [
            Counter("vllm:request_success", {**labels, "finished_reason": reason}, n)
            for reason, n in sorted(self.request_success.items())
        ]
        hists: list[Metric] = [
            self.ttft.export("vllm:time_to_first_token_seconds", labels),
            self.itl.export("vllm:inter_token_latency_seconds", labels),
            self.e2e.export("vllm:e2e_request_latency_seconds", labels),
            self.iteration_tokens.export("vllm:iteration_tokens_total", labels),
        ]
        return gauges + counters + hists
