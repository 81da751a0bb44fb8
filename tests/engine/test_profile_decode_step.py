"""benchmarks/profile_decode_step.py runs end to end without vLLM (``--no-vllm``) at a small batch: a smoke test
that its phases still match the kit's layer and engine (the figures themselves are the benchmark's)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "profile_decode_step.py"
PHASES = [
    "RMSNorm (x2 per layer)",
    "qkv_proj",
    "RoPE",
    "KV cache write + decode attention",
    "o_proj + residual",
    "gate_up_proj",
    "SiLU x up",
    "down_proj + residual",
    "LM head (once per step)",
]


def test_the_kit_phases_of_one_decode_step_are_timed_and_written(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("profile_decode_step", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.REPS = 1  # one timing loop per phase: this checks the script, not the figures
    out = tmp_path / "profile.md"
    assert module.main(["--no-vllm", "--batches", "2", "--dtypes", "float32", "--out", str(out)]) == 0
    text = out.read_text()
    assert "## float32, batch 2" in text and "vLLM (" not in text  # no vLLM section without vLLM
    rows = dict(re.findall(r"^\| ([^|*]+?) \| ([0-9.]+) \|", text, re.M))
    assert list(rows) == PHASES and all(float(ms) > 0 for ms in rows.values())
    step = re.search(r"\*\*whole engine step\*\*.*\*\*([0-9.]+)\*\*", text)
    assert step is not None and float(step.group(1)) > 0
