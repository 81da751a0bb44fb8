"""A seeded request's generators keep one type over its life (engine._gens: always a list)."""

from __future__ import annotations

import pytest
import torch

from pagedlab import LLM, SamplingParams

pytestmark = pytest.mark.model


def _run(llm: LLM, seed: int) -> tuple[list[dict[str, int]], list[list[int]]]:
    engine = llm.llm_engine
    params = SamplingParams(n=3, seed=seed, temperature=1.0, max_tokens=4, ignore_eos=True)
    engine.add_request("p", {"prompt_token_ids": list(range(5, 25))}, params)
    engine.add_request("plain", {"prompt_token_ids": list(range(5, 15))}, SamplingParams(max_tokens=2))
    shapes = [{rid: len(g) for rid, g in engine._gens.items()}]
    outs = []
    while engine.has_unfinished_requests():
        for o in engine.step():
            if o.request_id == "p":
                outs = [list(c.token_ids) for c in o.outputs]
        assert all(
            isinstance(g, list) and all(isinstance(x, torch.Generator) for x in g) for g in engine._gens.values()
        ), engine._gens
        shapes.append({rid: len(g) for rid, g in engine._gens.items()})
    return shapes, outs


def test_seeded_generators_are_lists_before_and_after_fork_and_reproducible() -> None:
    llm = LLM(num_gpu_blocks=64, max_model_len=256)
    shapes, outs = _run(llm, seed=7)
    assert shapes[0] == {"p": 3}  # the prompt's three generators; the unseeded request has none
    forked = shapes[1]
    assert forked["p"] == 1 and len(forked) == 3 and set(forked.values()) == {1}  # one per completion
    assert shapes[-1] == {}  # released when the completions finish
    assert len(outs) == 3 and all(len(t) == 4 for t in outs)
    again = _run(llm, seed=7)[1]
    assert again == outs  # same seed, same completions
