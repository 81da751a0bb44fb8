"""``SamplingParams.output_kind`` (vLLM's ``RequestOutputKind``): which outputs ``LLMEngine.step()`` returns."""

from __future__ import annotations

import pytest

from pagedlab import LLM, LLMEngine, SamplingParams
from pagedlab.errors import InvalidRequestError
from pagedlab.sampling_params import RequestOutputKind
from tests.kernels.test_engine_triton import tiny_llama

KIND = RequestOutputKind


def engine() -> LLMEngine:
    return LLMEngine(tiny_llama(), block_size=4, num_gpu_blocks=64, max_model_len=128)


def test_cumulative_is_the_default_and_delta_or_another_type_is_refused() -> None:
    assert SamplingParams().output_kind is KIND.CUMULATIVE
    with pytest.raises(InvalidRequestError, match=r"DELTA .* not implemented in pagedlab; use CUMULATIVE"):
        SamplingParams(output_kind=KIND.DELTA)
    with pytest.raises(InvalidRequestError, match="output_kind must be a RequestOutputKind, got 'final'"):
        SamplingParams(output_kind="final")  # type: ignore[arg-type]


def test_final_only_returns_nothing_until_the_end_and_cumulative_every_step() -> None:
    eng = engine()
    params = {
        kind: SamplingParams(temperature=0, max_tokens=5, ignore_eos=True, output_kind=kind)
        for kind in (KIND.CUMULATIVE, KIND.FINAL_ONLY)
    }
    eng.add_request("cum", {"prompt_token_ids": [3, 14, 15]}, params[KIND.CUMULATIVE])
    eng.add_request("final", {"prompt_token_ids": [9, 26, 5]}, params[KIND.FINAL_ONLY])
    seen: dict[str, list[tuple[int, bool]]] = {"cum": [], "final": []}
    while eng.has_unfinished_requests():
        for o in eng.step():
            seen[o.request_id].append((len(o.outputs[0].token_ids), o.finished))
    assert seen["cum"] == [(i, i == 5) for i in range(1, 6)]  # one growing output per step
    assert seen["final"] == [(5, True)]  # only the finished one


def test_final_only_gives_the_same_completion_as_cumulative() -> None:
    outs = {}
    for kind in (KIND.CUMULATIVE, KIND.FINAL_ONLY):
        eng = engine()
        eng.add_request(
            "r", {"prompt_token_ids": [7, 1, 60, 2]}, SamplingParams(temperature=0, max_tokens=6, output_kind=kind)
        )
        while eng.has_unfinished_requests():
            outs[kind] = [o for o in eng.step() if o.finished] or outs.get(kind)
    cum, final = outs[KIND.CUMULATIVE][0], outs[KIND.FINAL_ONLY][0]
    assert final.outputs[0].token_ids == cum.outputs[0].token_ids and final.outputs[0].text == cum.outputs[0].text
    assert final.pagedlab_metrics is not None and final.pagedlab_metrics.first_token_time is not None


def test_generate_runs_final_only_without_changing_the_callers_params(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = LLM(tiny_llama(), block_size=4, num_gpu_blocks=64, max_model_len=128, enable_prefix_caching=False)
    eng = llm.llm_engine
    built: list[bool] = []
    real = eng.output_processor.request_output
    monkeypatch.setattr(
        eng.output_processor,
        "request_output",
        lambda g, finished, now=None: built.append(finished) or real(g, finished, now),
    )
    mine = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    outs = llm.generate([[1, 2, 3], [4, 5]], mine)
    assert [len(o.outputs[0].token_ids) for o in outs] == [4, 4] and all(o.finished for o in outs)
    assert built == [True, True]  # no partial output was built on the way
    assert mine.output_kind is KIND.CUMULATIVE  # the caller's object is untouched (vLLM's LLM sets it)
    eng.add_request("later", {"prompt_token_ids": [8, 9]}, mine)  # and still streams through the engine
    assert [o.finished for o in eng.step()] == [False]
