"""``benchmarks/soak.py`` tells a warm-up plateau from a leak: it reports the growth after the first
minute in two halves (issue 26, item 5). Was: one figure over the whole run, so caches filling early
(oneDNN's kernels per padded shape) read as a steady leak."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def soak_module() -> Any:
    spec = importlib.util.spec_from_file_location("soak", ROOT / "benchmarks" / "soak.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def samples(rss_at: Any, minutes: int = 21) -> list[dict[str, Any]]:
    """One sample a minute; 30 steps and 10 requests a minute."""
    return [dict(t_min=float(t), rss_mb=rss_at(t), steps=30 * t, submitted=10 * t) for t in range(minutes)]


def test_a_plateau_has_a_flat_second_half() -> None:
    soak = soak_module()
    s = soak.summarize(samples(lambda t: 1000.0 + 8 * min(t, 11)), 20, None)  # +8 MB/min until minute 11
    assert s["first_half"]["mb_per_min"] == 8.0 and s["second_half"]["mb_per_min"] == 0.0
    assert s["mb_per_min_fit_second_half"] == 0.0
    assert s["rss_mid_mb"] == 1000.0 + 8 * 11 and s["first_half"]["t_min"] == [1.0, 11.0]


def test_a_leak_grows_in_both_halves_per_minute_step_and_request() -> None:
    soak = soak_module()
    s = soak.summarize(samples(lambda t: 1000.0 + 3 * t), 20, None)
    for half in ("first_half", "second_half"):
        assert s[half]["mb_per_min"] == 3.0
        assert s[half]["mb_per_1000_steps"] == 100.0 and s[half]["mb_per_1000_requests"] == 300.0
    assert s["mb_per_min_after_1min"] == 3.0 and s["mb_per_1000_requests"] == 300.0


def test_the_load_draws_every_sampling_parameter_the_kit_serves() -> None:
    """``random_params`` (issue 35, item 4): valid SamplingParams, and over a few hundred draws every field
    takes a non-default value (stop strings only with detokenization, as vLLM requires)."""
    import random

    from pagedlab.sampling_params import RequestOutputKind, SamplingParams

    soak = soak_module()
    rng, default = random.Random(0), SamplingParams()
    drawn = [soak.random_params(rng, 49152) for _ in range(400)]
    assert all(isinstance(p, SamplingParams) for p in drawn)
    assert all(p.detokenize for p in drawn if p.stop)
    for field in (
        "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "top_k",
        "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "min_tokens", "logprobs", "detokenize",
        "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output",
    ):  # fmt: skip
        assert any(getattr(p, field) != getattr(default, field) for p in drawn), field
    assert {p.output_kind for p in drawn} == {RequestOutputKind.CUMULATIVE, RequestOutputKind.FINAL_ONLY}
    assert max(p.n for p in drawn) == 3 and all(p.min_tokens <= p.max_tokens for p in drawn)


def test_the_warm_up_runs_one_step_at_every_padded_row_count() -> None:
    """``warm_shapes`` schedules, alone, prompts summing to each padded row count, each within max_model_len."""
    from types import SimpleNamespace

    from pagedlab.model.cpu_linear import padded_rows

    soak = soak_module()

    class Engine:
        scheduler_config = SimpleNamespace(max_num_batched_tokens=512, max_model_len=300, max_num_seqs=32)
        model_config = SimpleNamespace(vocab_size=1000)

        def __init__(self) -> None:
            self.pending: list[int] = []
            self.steps: list[int] = []

        def add_request(self, rid: str, prompt: dict[str, list[int]], params: Any) -> None:
            assert params.max_tokens == 1 and len(prompt["prompt_token_ids"]) < 300
            self.pending.append(len(prompt["prompt_token_ids"]))

        def has_unfinished_requests(self) -> bool:
            return bool(self.pending)

        def step(self) -> list[Any]:
            self.steps.append((sum(self.pending), len(self.pending)))  # (token rows, sampled rows)
            self.pending = []
            return []

    eng = Engine()
    shapes = soak.warm_shapes(eng, 0)
    assert shapes == sorted({padded_rows(t) for t in range(1, 513)}) and len(shapes) == 56
    assert [t for t, _ in eng.steps[:56]] == shapes  # every padded token count, once
    seqs = sorted({padded_rows(n) for n in range(1, 33)})
    assert [n for _, n in eng.steps[56:]] == seqs  # then every padded count of sampled sequences (the LM head)
