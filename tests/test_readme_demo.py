"""The README's ``make demo`` transcript is a real run of this engine: its answers and counts are what
``pagedlab generate data/prompts.jsonl`` prints now, and its timing lines agree with each other.

The counts (tokens, steps, peak KV blocks, batch size) and greedy answers are exact on any CPU in fp32; the
timings are the README's machine's (named beside the block), so they are checked for consistency only, and this
run's figures go to ``tests/artifacts/demo_run.txt`` beside the other CI figures.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts"
EXACT = ("requests", "prompt tokens", "generated tokens", "peak KV blocks", "steps", "mean batch size")

pytestmark = [pytest.mark.model, pytest.mark.slow]


def readme_transcript() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("$ make demo\n")
    return text[start : text.index("```", start)]


def summary(text: str) -> dict[str, str]:
    """The summary block's lines: name -> value (``requests            32`` -> ``{"requests": "32"}``)."""
    block = text[text.index("=== pagedlab generate: summary ===") :]
    return {m[1]: m[2].strip() for m in re.finditer(r"^([a-zA-Z][a-zA-Z ]*?)\s{2,}(.+)$", block, flags=re.M)}


def answers(text: str) -> dict[str, tuple[str, str]]:
    """``[id] prompt`` and the first line of its answer, for each request the transcript shows."""
    return {m[1]: (m[2], m[3]) for m in re.finditer(r"^\[(\w+)\] (.*)\n  -> (.*)$", text, flags=re.M)}


@pytest.fixture(scope="module")
def run() -> str:
    r = subprocess.run(
        [sys.executable, "-m", "pagedlab.cli", "generate", "data/prompts.jsonl"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "demo_run.txt").write_text(r.stdout)
    return r.stdout


def test_the_readme_shows_this_engines_answers_and_counts(run):
    readme = readme_transcript()
    shown, now = answers(readme), answers(run)
    assert len(shown) >= 2
    for rid, (prompt, first_line) in shown.items():
        assert now[rid] == (prompt, first_line), f"[{rid}] README: {first_line!r}, make demo now: {now[rid][1]!r}"
    ours, theirs = summary(readme), summary(run)
    assert set(ours) == set(theirs), (sorted(ours), sorted(theirs))
    for name in EXACT:
        assert ours[name] == theirs[name], f"{name}: README {ours[name]!r}, make demo now {theirs[name]!r}"


def test_the_readme_timings_agree_with_each_other():
    s = summary(readme_transcript())
    wall = float(s["wall time"].removesuffix(" s"))
    gen_rate, total_rate = (float(x) for x in re.findall(r"([\d.]+) \w+ tok/s", s["throughput"]))
    generated, prompt = int(s["generated tokens"]), int(s["prompt tokens"])
    # the printed wall time and rates are rounded to 0.1; the rates are the unrounded wall's
    assert generated / (wall + 0.05) - 0.05 <= gen_rate <= generated / (wall - 0.05) + 0.05
    assert abs(total_rate / gen_rate - (generated + prompt) / generated) < 1e-3
    assert float(s["median TTFT"].removesuffix(" s")) < wall
