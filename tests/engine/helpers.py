"""Shared helpers for engine tests (kept out of conftest so test modules can import them)."""

from __future__ import annotations

MAX_NEW = 24


def run_engine(prompts, max_tokens=MAX_NEW, n=1, **engine_kwargs):
    """Greedy completions from pagedlab with all prompts submitted at once.

    Returns ``(llm, outputs)``.
    """
    from pagedlab import LLM, SamplingParams

    engine_kwargs.setdefault("enable_prefix_caching", False)  # LLM's default is True, as vLLM v1
    llm = LLM(**engine_kwargs)
    outs = llm.generate(
        [{"prompt_token_ids": p} for p in prompts], SamplingParams(temperature=0, max_tokens=max_tokens, n=n)
    )
    return llm, outs


def assert_same_tokens(outs, refs, label):
    for i, (o, ref) in enumerate(zip(outs, refs)):
        got = o.outputs[0].token_ids
        assert got == ref, f"{label}: prompt {i} diverged\n  got {got}\n  HF  {ref}"
