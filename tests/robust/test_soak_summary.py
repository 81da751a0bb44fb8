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
