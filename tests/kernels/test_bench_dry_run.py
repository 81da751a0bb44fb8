"""The GPU benchmark script runs its correctness and measurement paths on CPU (``--dry-run``)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_paged_attention.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_paged_attention", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dry_run_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    assert _load().main(["--dry-run", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["dry_run"] and all(c["ok"] for c in result["correctness"])
    impls = {r["impl"] for r in result["records"]}
    assert {"triton", "triton_split2", "sdpa_pregathered", "gather+sdpa"} <= impls
    assert {r["kind"] for r in result["records"]} == {"decode", "prefill"}
    assert all(r["max_abs_err"] < 5e-3 for r in result["records"])
    assert "| decode |" in result["markdown"]


@pytest.mark.no_interpreter_needed
def test_refuses_to_run_without_cuda(capsys, monkeypatch):
    bench = _load()
    monkeypatch.setattr(bench.torch.cuda, "is_available", lambda: False)
    assert bench.main([]) == 2
    assert "no CUDA device found" in capsys.readouterr().err
