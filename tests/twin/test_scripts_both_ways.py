"""vLLM's own offline example (tests/compat/vllm_examples) gives the same greedy text on real vLLM and on the
kit (``pagedlab run-vllm``), unchanged, with the same command-line arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pagedlab.twin.hf_model import hf_model_dir
from pagedlab.vllm_version import vllm_python

EXAMPLES = Path(__file__).resolve().parents[1] / "compat" / "vllm_examples"


def _args() -> list[str]:
    return [
        *("--model", str(hf_model_dir()), "--dtype", "float32", "--enforce-eager", "--block-size", "32"),
        *("--num-gpu-blocks-override", "33", "--max-model-len", "1024", "--gpu-memory-utilization", "0.1"),
        *("--temperature", "0", "--max-tokens", "8"),
    ]


def _generated(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "Generated text:" in line]


def test_generate_py_prints_the_same_greedy_text_on_both() -> None:
    script = str(EXAMPLES / "basic" / "generate.py")
    real = subprocess.run(
        [str(vllm_python()), "-I", script, *_args()],
        capture_output=True,
        text=True,
        timeout=900,
        env={"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PATH": "/usr/bin:/bin"},
    )
    kit = subprocess.run(
        [sys.executable, "-m", "pagedlab.cli", "run-vllm", "--model-override", f"{hf_model_dir()}=", script, *_args()],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert len(_generated(real.stdout)) == 4, real.stderr[-3000:]
    assert _generated(kit.stdout) == _generated(real.stdout), kit.stderr[-3000:]
