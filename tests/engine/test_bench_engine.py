"""benchmarks/bench_engine.py's bookkeeping: step reconstruction, ratios, busy warnings, roofline share."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_engine.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_engine", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_decode_steps_are_rebuilt_from_token_timestamps(bench: ModuleType) -> None:
    # Request 0 (prompt 10) emits at 1.0, 1.1, 1.2; request 1 (prompt 5) joins with its first token
    # at 1.1 (so that step also ended a prefill) and decodes at 1.2, 1.35.
    times = [[1.0, 1.1, 1.2], [1.1003, 1.2002, 1.35]]
    steps = bench.steps_from_token_times(times, [10, 5])
    assert steps == [(pytest.approx(0.0999), [11, 5]), (pytest.approx(0.1498), [6])]


def test_ratios_pair_each_repetition_with_pagedlab_of_the_same_repetition(bench: ModuleType) -> None:
    runs = {
        "pagedlab": [{"rep": 1, "tok_per_s": 200.0}, {"rep": 2, "tok_per_s": 150.0}, {"rep": 3, "tok_per_s": 90.0}],
        "hf_continuous": [{"rep": 1, "tok_per_s": 100.0}, {"rep": 2, "tok_per_s": 50.0}, {"rep": 3, "tok_per_s": 60.0}],
        "hf_sequential": [{"rep": 2, "tok_per_s": 15.0}],
    }
    r = bench.ratios(runs)
    assert set(r) == {"hf_continuous", "hf_sequential"}
    assert r["hf_continuous"] == {"per_rep": [2.0, 3.0, 1.5], "min": 1.5, "median": 2.0, "max": 3.0}
    assert r["hf_sequential"] == {"per_rep": [10.0], "min": 10.0, "median": 10.0, "max": 10.0}


def test_busy_warnings_name_load_spread_and_drift(bench: ModuleType) -> None:
    quiet = [0.100, 0.101, 0.102, 0.100, 0.103, 0.101, 0.100]
    checks = [
        {"rep": 1, "loadavg_1m": 1.5, "calibration_s": quiet},
        {"rep": 2, "loadavg_1m": 2.5, "calibration_s": quiet},
        {"rep": 3, "loadavg_1m": 0.5, "calibration_s": [0.10, 0.10, 0.13, 0.10, 0.10, 0.10, 0.10]},
        {"rep": 4, "loadavg_1m": 0.5, "calibration_s": [x * 1.2 for x in quiet]},
    ]
    assert bench.busy_warnings(checks, 2) == [
        "rep 2: load average 2.5 > 2 cores",
        "rep 3: calibration loop spread 30% (> 15%)",
        "rep 4: calibration loop 1.20x the first repetition's",
    ]
    assert bench.busy_warnings(checks[:1], 2) == []


def test_roofline_share_uses_the_measured_rate_of_each_batch(bench: ModuleType) -> None:
    from pagedlab.sim.models import SMOLLM2_135M as m

    def flops(b: int, c: int) -> float:  # b sequences holding c tokens
        attention = 4.0 * m.num_layers * m.num_heads * m.head_dim * b * (c + 1)
        return 2.0 * b * (m.num_linear_params + m.lm_head_params) + attention

    roofs = {
        "copy_bandwidth_Bps": 1e12,
        "matmul": {"16": {"flops_per_s": 1e11}, "20": {"flops_per_s": 2e11}, "2": {"flops_per_s": 1e10}},
    }
    want16, want20 = flops(16, 100) / 1e11, flops(20, 50) / 2e11  # compute-bound at 1 TB/s
    steps = [(2 * want16, [100] * 16), (want20, [50] * 20), (0.5, [7, 7])]  # the batch-2 step is left out
    sh = bench.roofline_share(steps, roofs)
    assert sh["steps"] == 2 and sh["median_batch"] == 18
    assert sh["roofline_s"] == pytest.approx(want16 + want20)
    assert sh["share"] == pytest.approx((want16 + want20) / (2 * want16 + want20))
    assert sh["median_step_share"] == pytest.approx(0.75)
    assert sh["median_step_ms"] == pytest.approx(1000 * (2 * want16 + want20) / 2)
    assert bench.roofline_share(steps[2:], roofs) is None
    roofs["matmul"]["24"] = {"flops_per_s": 5e10}  # a noisy, slower larger batch
    noisy = bench.roofline_share([(want20, [50] * 24)], roofs)
    assert noisy["roofline_s"] == pytest.approx(flops(24, 50) / 2e11)  # credited with batch 20's rate


def test_each_repetition_meets_the_roofs_measured_after_it(bench: ModuleType) -> None:
    from pagedlab.sim.models import SMOLLM2_135M as m

    def flops(b: int, c: int) -> float:
        return 2.0 * b * (
            m.num_linear_params + m.lm_head_params
        ) + 4.0 * m.num_layers * m.num_heads * m.head_dim * b * (c + 1)

    fast = {"copy_bandwidth_Bps": 1e12, "matmul": {"16": {"flops_per_s": 2e11}}}
    slow = {"copy_bandwidth_Bps": 1e12, "matmul": {"16": {"flops_per_s": 1e11}}}  # a busy repetition
    roof_fast, roof_slow = flops(16, 100) / 2e11, flops(16, 100) / 1e11
    parts = [([(2 * roof_fast, [100] * 16)], fast), ([(2 * roof_slow, [100] * 16), (0.1, [3])], slow), ([], fast)]
    sh = bench.roofline_share_by_rep(parts)
    assert sh["per_rep_share"] == [pytest.approx(0.5), pytest.approx(0.5), None]
    assert sh["steps"] == 2 and sh["share"] == pytest.approx(0.5)
    assert sh["roofline_s"] == pytest.approx(roof_fast + roof_slow)
    assert bench.roofline_share_by_rep([([], fast)]) is None
    # One set of roofs for both would misjudge the busy repetition: 25% instead of 50%.
    assert bench.roofline_share(parts[1][0], fast)["share"] == pytest.approx(0.25)


def test_median_roofs_takes_each_figure_over_the_repetitions(bench: ModuleType) -> None:
    reps = [
        {"copy_bandwidth_Bps": bw, "matmul": {"1": {"flops_per_s": f1}, **({"20": {"flops_per_s": 9.0}} if i else {})}}
        for i, (bw, f1) in enumerate([(3.0, 10.0), (1.0, 30.0), (2.0, 20.0)])
    ]
    med = bench.median_roofs(reps)
    assert med == {
        "copy_bandwidth_Bps": 2.0,
        "matmul": {"1": {"flops_per_s": 20.0}, "20": {"flops_per_s": 9.0}},
        "reps": 3,
    }


def test_every_worker_inherits_the_kits_openmp_wait_policy() -> None:
    # Loading the script (as each worker does) sets the kit's policy before anything imports torch,
    # so the roof worker cannot spin while the engine waits passively; an explicit setting is kept.
    code = (
        "import importlib.util, os\n"
        f"spec = importlib.util.spec_from_file_location('b', {str(SCRIPT)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "import sys; print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}

    def policy(extra: dict[str, str]) -> str:
        p = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    assert policy({}) == "PASSIVE False"  # set, and torch not yet loaded (libgomp reads it at load)
    assert policy({"OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE False"


def test_run_pagedlab_serves_a_tiny_workload_and_rebuilds_its_decode_steps(bench: ModuleType) -> None:
    # The real model on two prompts: every request gets its whole budget (EOS ignored), and the step spy that
    # wraps ModelRunner.forward sees every step, so the pure decode steps come out with each sequence's
    # context: prompts of 5 and 3 tokens, one prefill step, then decodes at 5+3, 6+4 and 5 (request 0 done).
    r = bench.run_pagedlab([[1, 2, 3, 4, 5], [6, 7, 8]], [3, 4], 16)
    assert [len(t) for t in r["token_ids"]] == [3, 4] and r["tokens"] == 7
    assert [ctx for _s, ctx in r["decode_steps"]] == [[5, 3], [6, 4], [5]]
    assert all(s > 0 for s, _ctx in r["decode_steps"])
    assert len(r["ttft"]) == 2 and len(r["tpot"]) == 2 and r["preemptions"] == 0
    assert 0 < max(r["ttft"]) < r["wall_s"]
