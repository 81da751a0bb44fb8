"""Trace loaders on the shipped files, bad input, scaling and prompt synthesis."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagedlab.errors import TraceFormatError
from pagedlab.sim.traces import (
    TraceRequest,
    duration,
    load_azure,
    load_mooncake,
    load_trace,
    prefix_hit_ceiling,
    scale_for_cpu,
    synthesize_prompts,
)

DATA = Path(__file__).resolve().parents[2] / "data"
AZURE_CODE = DATA / "azure2023_AzureLLMInferenceTrace_code.csv"
AZURE_CONV = DATA / "azure2023_AzureLLMInferenceTrace_conv.csv"
MC_CONV = DATA / "mooncake_fast25_conversation_trace.jsonl"
MC_SYN = DATA / "mooncake_fast25_synthetic_trace.jsonl"


@pytest.fixture(scope="module")
def full():
    return {p.name: load_trace(p) for p in (AZURE_CODE, AZURE_CONV, MC_CONV, MC_SYN)}


# --- the real files: counts, durations and means as in data/SOURCES.md -----------------------------
@pytest.mark.parametrize(
    "path,count,dur,in_mean,out_mean",
    [
        (AZURE_CODE, 8819, 3436, 2048, 27.9),
        (AZURE_CONV, 19366, 3502, 1155, 211),
        (MC_CONV, 12031, 3537, 12035, 343),
        (MC_SYN, 3993, 1022, 15326, 149),
    ],
)
def test_real_files_match_sources(full, path, count, dur, in_mean, out_mean):
    reqs = full[path.name]
    assert len(reqs) == count
    assert duration(reqs) == pytest.approx(dur, abs=1)
    assert reqs[0].arrival_time == 0
    assert sum(r.prompt_len for r in reqs) / count == pytest.approx(in_mean, rel=0.002)
    assert sum(r.output_len for r in reqs) / count == pytest.approx(out_mean, rel=0.005)
    assert all(a.arrival_time <= b.arrival_time for a, b in zip(reqs, reqs[1:]))


def test_azure_fields_and_slicing():
    first = load_azure(AZURE_CONV, limit=2)
    assert [(r.prompt_len, r.output_len) for r in first] == [(374, 44), (396, 109)]
    assert first[1].arrival_time == pytest.approx(4.314579, abs=1e-6)  # 18:15:50.9951690 - 18:15:46.6805900
    assert first[0].hash_ids is None and first[1].line == 3
    sl = load_azure(AZURE_CONV, start=100, limit=5)
    assert len(sl) == 5 and sl[0].line == 102
    assert sl[0].arrival_time > 0  # offsets stay relative to the file's first row


def test_mooncake_fields_and_ceilings(full):
    first = load_mooncake(MC_CONV, limit=1)[0]
    assert (first.prompt_len, first.output_len, first.hash_ids[:3], first.block_tokens) == (6758, 500, (0, 1, 2), 512)
    assert load_mooncake(MC_CONV, start=10, limit=3)[0].line == 11
    # Ceilings quoted in SOURCES.md, computed from hash_ids here.
    assert prefix_hit_ceiling(full[MC_CONV.name]) == pytest.approx(0.366, abs=0.005)
    assert prefix_hit_ceiling(full[MC_SYN.name]) == pytest.approx(0.64, abs=0.005)
    with pytest.raises(ValueError):
        prefix_hit_ceiling(full[AZURE_CONV.name][:3])


def test_prefix_ceiling_counts_contiguous_prefix_only():
    reqs = [TraceRequest(0, 1024, 1, (1, 2)), TraceRequest(1, 1536, 1, (1, 9, 2))]
    # Second request: block 1 hits, 9 misses, 2 was seen but after a miss: no hit.
    assert prefix_hit_ceiling(reqs) == pytest.approx(1 / 5)


# --- bad input ----------------------------------------------------------------------------------------
def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


AZ_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


@pytest.mark.parametrize(
    "body,line,words",
    [
        ("2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.99,abc,109\n", 3, "ContextTokens"),
        ("2023-11-16 18:15:46.6805900,374,44\nnot-a-date,1,1\n", 3, "TIMESTAMP"),
        ("2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396\n", 3, "expected 3 fields"),
        ("2023-11-16 18:15:46.6805900,374,-4\n", 2, ">= 0"),
        ("2023-11-16 18:15:50.0,374,4\n2023-11-16 18:15:49.0,1,1\n", 3, "earlier"),
    ],
)
def test_azure_bad_rows_name_the_line(tmp_path, body, line, words):
    p = _write(tmp_path, "t.csv", AZ_HEAD + body)
    with pytest.raises(TraceFormatError) as e:
        load_azure(p)
    assert f"{p}:{line}:" in str(e.value) and words in str(e.value)


def test_azure_missing_column_and_empty(tmp_path):
    p = _write(tmp_path, "t.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.68,3\n")
    with pytest.raises(TraceFormatError, match=r"t.csv:1: missing column\(s\) GeneratedTokens"):
        load_trace(p)
    with pytest.raises(TraceFormatError, match="empty file"):
        load_azure(_write(tmp_path, "e.csv", ""))


@pytest.mark.parametrize(
    "lines,line,words",
    [
        (
            ['{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}', '{"timestamp": 5, '],
            2,
            "not valid JSON",
        ),
        (['{"timestamp": 0, "input_length": 10, "output_length": 2}', "[1, 2]"], 2, "JSON object"),
        (['{"timestamp": 0, "input_length": 10}'], 1, "missing key(s) output_length"),
        (['{"timestamp": 0, "input_length": -1, "output_length": 2}'], 1, "input_length must be >= 0"),
        (['{"timestamp": 0, "input_length": 10, "output_length": 2.5}'], 1, "output_length must be an integer"),
        (
            [
                '{"timestamp": 9, "input_length": 10, "output_length": 2}',
                "",
                '{"timestamp": 3, "input_length": 10, "output_length": 2}',
            ],
            3,
            "earlier than 0.009000 s on line 1",
        ),
        (
            ['{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1]}'],
            1,
            "expected ceil(600/512) = 2",
        ),
        (['{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": ["a"]}'], 1, "list of integers"),
        (['{"timestamp": "x", "input_length": 10, "output_length": 2}'], 1, "timestamp must be a number"),
    ],
)
def test_mooncake_bad_lines_name_the_line(tmp_path, lines, line, words):
    p = _write(tmp_path, "t.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as e:
        load_trace(p)
    assert f"{p}:{line}:" in str(e.value) and words in str(e.value)


def test_unknown_type(tmp_path):
    with pytest.raises(TraceFormatError, match="unknown trace type"):
        load_trace(_write(tmp_path, "t.txt", "x"))


# --- scaling and synthesis ------------------------------------------------------------------------------
def test_scale_for_cpu_is_linear_and_clipped():
    reqs = load_mooncake(MC_CONV, start=50, limit=40)
    small = scale_for_cpu(reqs, max_prompt=256, max_output=32, time_scale=10)
    assert small[0].arrival_time == 0
    assert all(1 <= r.prompt_len <= 256 and 1 <= r.output_len <= 32 for r in small)
    assert max(r.prompt_len for r in small) == 256 and max(r.output_len for r in small) == 32
    s = 256 / max(r.prompt_len for r in reqs)
    assert small[0].block_tokens == max(1, round(512 * s))
    assert small[5].arrival_time == pytest.approx(10 * (reqs[5].arrival_time - reqs[0].arrival_time))
    # Relative prompt lengths survive.
    _a, b = max(reqs, key=lambda r: r.prompt_len), min(reqs, key=lambda r: r.prompt_len)
    assert abs(small[reqs.index(b)].prompt_len - round(b.prompt_len * s)) <= 1
    assert reqs[0].prompt_len == load_mooncake(MC_CONV, start=50, limit=1)[0].prompt_len  # input unchanged
    assert scale_for_cpu([]) == []
    with pytest.raises(ValueError):
        scale_for_cpu(reqs, max_prompt=0)


def test_synthesize_prompts_shares_exactly_the_traced_prefixes():
    reqs = [
        TraceRequest(0, 20, 1, (7, 8, 9), block_tokens=8),
        TraceRequest(1, 13, 1, (7, 8), block_tokens=8),
        TraceRequest(2, 10, 1, (5, 8), block_tokens=8),
        TraceRequest(3, 12, 1),
    ]
    p = synthesize_prompts(reqs, vocab_size=1000, seed=3, min_token_id=10)
    assert [len(x) for x in p] == [20, 13, 10, 12]
    assert p[0][:13] == p[1]  # leading ids 7, 8 agree
    assert p[2][:8] != p[0][:8]  # id 5 differs from 7
    assert all(10 <= t < 1000 for x in p for t in x)
    assert p == synthesize_prompts(reqs, vocab_size=1000, seed=3, min_token_id=10)
    assert p != synthesize_prompts(reqs, vocab_size=1000, seed=4, min_token_id=10)
    # A prompt longer than its blocks (after rounding) is padded with request-unique tokens.
    long = synthesize_prompts([TraceRequest(0, 10, 1, (1,), block_tokens=4)], 100)
    assert len(long[0]) == 10
