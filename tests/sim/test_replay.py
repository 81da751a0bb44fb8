"""`pagedlab replay` (simulator mode, files and plots) and replay on the real SmolLM2 engine."""

from __future__ import annotations

import argparse
import json

import pytest

from pagedlab.errors import ConfigError, TraceFormatError
from pagedlab.sim import replay
from pagedlab.sim.traces import TraceRequest, load_trace, scale_for_cpu


def _args(*argv):
    p = argparse.ArgumentParser()
    replay.add_arguments(p)
    return p.parse_args(list(argv))


def test_cli_sim_writes_tables_and_plots(tmp_path, capsys):
    out = tmp_path / "out"
    rc = replay.main(
        _args(
            "azure-conv",
            "--sim",
            "--gpu",
            "A100-80G",
            "--model",
            "llama-2-7b",
            "--limit",
            "60",
            "--scheduling",
            "both",
            "--time-scale",
            "0.2",
            "--out",
            str(out),
            "--plot",
            "--no-progress",
        )
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "llama-2-7b on A100-80G" in text and "static" in text and "continuous" in text
    for name in (
        "summary.json",
        "requests_static.csv",
        "requests_continuous.csv",
        "steps_continuous.csv",
        "ttft_cdf.png",
        "tpot_cdf.png",
        "kv_usage.png",
    ):
        assert (out / name).stat().st_size > 0, name
    assert (out / "ttft_cdf.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["continuous"]["summary"]["num_requests"] == 60
    assert summary["continuous"]["config"]["gpu"] == "A100-80G"
    header = (out / "requests_continuous.csv").read_text().splitlines()[0]
    assert header.startswith("request_id,arrival_time,prompt_len,output_len")


def test_cli_mooncake_prefix_caching_and_tp(tmp_path, capsys):
    assert (
        replay.main(
            _args(
                "mooncake-synthetic",
                "--gpu",
                "2xH100",
                "--model",
                "70b",
                "--limit",
                "20",
                "--enable-prefix-caching",
                "--no-progress",
            )
        )
        == 0
    )
    assert "llama-2-70b on 2xH100" in capsys.readouterr().out


def test_cli_errors_are_clear(tmp_path):
    with pytest.raises(TraceFormatError, match="not found"):
        replay.run(_args(str(tmp_path / "missing.csv")))
    with pytest.raises(ConfigError, match="unknown GPU"):
        replay.run(_args("azure-code", "--gpu", "V100", "--limit", "3"))
    with pytest.raises(ConfigError, match="use more GPUs"):
        replay.run(_args("azure-code", "--model", "llama-2-70b", "--limit", "3"))
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,3,1\n2023-11-16 18:15:45.68,3,1\n")
    with pytest.raises(TraceFormatError, match=r"bad.csv:3: arrival time"):
        replay.run(_args(str(bad)))


def test_registered_in_pagedlab_cli(tmp_path):
    from pagedlab import cli

    if "replay" not in {c.name for c in cli.COMMANDS}:
        pytest.skip("replay is not registered in pagedlab/cli.py yet")
    assert cli.main(["replay", "azure-code", "--limit", "10", "--no-progress"]) == 0
    assert cli.main(["replay", str(tmp_path / "nope.jsonl")]) == 1


# --- the real engine ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine():
    from pagedlab.model.fetch import model_path

    if not model_path().exists():
        pytest.skip("model not fetched; run `pagedlab fetch-model`")
    from pagedlab.engine.llm_engine import LLMEngine

    return LLMEngine(
        block_size=16,
        num_gpu_blocks=64,
        max_num_seqs=8,
        max_num_batched_tokens=128,
        enable_prefix_caching=True,
        hash_seed=0,
    )


@pytest.mark.model
@pytest.mark.slow
def test_replay_on_engine_honours_arrivals_and_shares_prefixes(engine):
    mc = load_trace(replay.resolve_trace("mooncake-conv"), limit=3)
    reqs = scale_for_cpu(mc, max_prompt=40, max_output=2, token_scale=1 / 16, time_scale=0.01)
    reqs.append(TraceRequest(1000.0, 20, 2))  # long idle gap: skipped, not slept
    assert reqs[0].block_tokens == 32
    res = replay.replay_on_engine(None, reqs, engine=engine)
    assert len(res.requests) == 4 and not res.rejected
    by_id = {r.request_id: r for r in res.requests}
    for i, tr in enumerate(reqs):
        r = by_id[str(i)]
        assert r.output_len == tr.output_len and r.prompt_len == tr.prompt_len
        assert r.arrival_time == pytest.approx(tr.arrival_time, abs=1e-6)
        assert r.first_token_time >= r.arrival_time and r.finished_time >= r.first_token_time
    assert by_id["3"].ttft < 100  # the 1000 s gap cost nothing
    # Mooncake requests 0..2 share hash id 0 (32 tokens here): later ones hit its 2 blocks.
    assert sum(r.num_cached_tokens for r in res.requests) >= 32
    assert res.summary()["num_requests"] == 4 and res.steps[0].num_prefill_tokens > 0
    kv = engine.kv_cache_manager
    assert not engine.has_unfinished_requests() and kv.num_free_blocks == kv.num_gpu_blocks
    engine.add_request("busy", [1, 2, 3])
    try:
        with pytest.raises(ValueError, match="idle engine"):
            replay.replay_on_engine(None, reqs, engine=engine)
    finally:
        engine.abort_request("busy")
