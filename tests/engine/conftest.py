"""Fixtures for engine tests: real prompts, and HF transformers' greedy outputs as the oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from tests.engine.helpers import MAX_NEW


def _prompt_rows():
    return [json.loads(l) for l in (ROOT / "data" / "prompts.jsonl").read_text().splitlines() if l.strip()]


@pytest.fixture(scope="session")
def tokenizer():
    from pagedlab.model.loader import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def real_prompts(tokenizer):
    """16 real chat prompts as token ids: 12 questions, 2 long summaries, 2 exact repeats.

    All share SmolLM2's default system prompt (a common prefix for prefix caching).
    """
    rows = _prompt_rows()
    convs = [r["messages"] for r in rows[:12]] + [rows[24]["messages"], rows[26]["messages"]]
    convs += [convs[0], convs[12]]  # repeated prompts: exact prefix hits
    out = []
    for c in convs:
        ids = tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=True)
        out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return out


@pytest.fixture(scope="session")
def hf_greedy(real_prompts):
    """HF transformers' ``generate`` (greedy, batch 1) on the same GGUF: the parity oracle."""
    from pagedlab.model.hf_reference import hf_greedy as greedy
    from pagedlab.model.hf_reference import load_hf_model

    hf = load_hf_model()
    refs = {}
    for ids in real_prompts:
        if tuple(ids) not in refs:
            refs[tuple(ids)] = greedy(hf, ids, MAX_NEW)
    return [refs[tuple(ids)] for ids in real_prompts]
