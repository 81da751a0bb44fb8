"""SamplingParams as vLLM (fields, defaults, validation) and the sampler features behind them."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from pagedlab.errors import InvalidRequestError
from pagedlab.model.sampler import apply_min_p, apply_penalties, sample, top_logprobs
from pagedlab.request import Request
from pagedlab.sampling_params import BeamSearchParams, SamplingParams


def test_defaults_are_vllms():
    sp = SamplingParams()
    assert (sp.n, sp.temperature, sp.top_p, sp.top_k, sp.min_p, sp.max_tokens, sp.min_tokens, sp.seed) == (
        1,
        1.0,
        1.0,
        0,
        0.0,
        16,
        0,
        None,
    )
    assert (sp.presence_penalty, sp.frequency_penalty, sp.repetition_penalty) == (0.0, 0.0, 1.0)
    assert (sp.stop, sp.stop_token_ids, sp.logprobs, sp.ignore_eos) == ([], [], None, False)
    assert (sp.detokenize, sp.skip_special_tokens, sp.include_stop_str_in_output) == (True, True, False)


def test_vllm_spellings_are_accepted_and_normalised():
    sp = SamplingParams(max_tokens=None, stop_token_ids=None, seed=-1, top_k=-1, stop="x", logprobs=True)
    assert (sp.max_tokens, sp.stop_token_ids, sp.seed, sp.top_k, sp.stop, sp.logprobs) == (None, [], None, 0, ["x"], 1)
    assert SamplingParams(stop_token_ids=[5, 7, 5]).stop_token_ids == [5, 7]  # de-duplicated, order kept


def test_tiny_temperature_is_raised_to_vllms_minimum_with_a_warning():
    with pytest.warns(UserWarning, match="raised to 0.01"):
        sp = SamplingParams(temperature=1e-4)
    assert sp.temperature == 0.01 and not sp.greedy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SamplingParams(temperature=0.01).temperature == 0.01  # the boundary itself: no warning


def test_greedy_resets_the_filters_as_vllm():
    sp = SamplingParams(temperature=0, top_p=0.5, top_k=3, min_p=0.2)
    assert sp.greedy and (sp.top_p, sp.top_k, sp.min_p) == (1.0, 0, 0.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"presence_penalty": 2.5}, "presence_penalty must be in \\[-2, 2\\]"),
        ({"frequency_penalty": -2.01}, "frequency_penalty must be in \\[-2, 2\\]"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be greater than zero"),
        ({"repetition_penalty": float("inf")}, "repetition_penalty must be a finite number"),
        ({"temperature": -0.1}, "temperature must be non-negative"),
        ({"temperature": float("nan")}, "temperature must be a finite number"),
        ({"top_p": 0.0}, "top_p must be in \\(0, 1\\]"),
        ({"top_k": -2}, "top_k must be 0 or -1"),
        ({"top_k": 2.0}, "top_k must be 0 or -1"),
        ({"min_p": 1.5}, "min_p must be in \\[0, 1\\]"),
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"min_tokens": -1}, "min_tokens must be an int >= 0"),
        ({"min_tokens": 5, "max_tokens": 4}, "min_tokens must be less than or equal to max_tokens=4"),
        ({"logprobs": -2}, "logprobs must be None, -1"),
        ({"n": 0}, "n must be an int >= 1"),
        ({"seed": 1.5}, "seed must be an int or None"),
        ({"stop": [""]}, "stop must be non-empty strings"),
        ({"stop": 5}, "stop must be a string or a list"),
        ({"stop_token_ids": [-1]}, "stop_token_ids must be a list of token ids"),
        ({"stop_token_ids": 3}, "stop_token_ids must be a list of token ids"),
        ({"detokenize": "no"}, "detokenize must be True or False"),
        ({"skip_special_tokens": 1}, "skip_special_tokens must be True or False"),
    ],
)
def test_bad_values_are_refused(kwargs, match):
    with pytest.raises(InvalidRequestError, match=match):
        SamplingParams(**kwargs)


def test_boundaries_are_accepted():
    SamplingParams(
        presence_penalty=-2.0,
        frequency_penalty=2.0,
        min_p=1.0,
        top_p=1.0,
        min_tokens=16,
        max_tokens=16,
        logprobs=-1,
        top_k=1,
    )
    SamplingParams(min_p=0.0, logprobs=0, min_tokens=0)


def test_unknown_field_is_a_type_error():
    with pytest.raises(TypeError, match="prompt_logprobs"):
        SamplingParams(prompt_logprobs=1)  # type: ignore[call-arg]


def test_beam_search_params_where_vllm_has_them():
    from pagedlab.engine import beam_search

    assert beam_search.BeamSearchParams is BeamSearchParams
    p = BeamSearchParams(beam_width=2, max_tokens=3)
    assert (p.ignore_eos, p.temperature, p.length_penalty) == (False, 0.0, 1.0)
    with pytest.raises(InvalidRequestError, match="only 0 is implemented"):
        BeamSearchParams(beam_width=2, max_tokens=3, temperature=0.5)
    with pytest.raises(InvalidRequestError, match="beam_width"):
        BeamSearchParams(beam_width=0, max_tokens=3)


# --- the sampler ---------------------------------------------------------------------------------


def _req(prompt, output, eos=None):
    r = Request("r", list(prompt), SamplingParams(), eos_token_id=eos)
    r.append_output_token_ids(list(output))
    return r


def test_penalties_follow_vllms_formulas():
    logits = torch.tensor([2.0, -1.0, 0.5, 3.0, 1.0])
    sp = SamplingParams(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25)
    out = apply_penalties(logits, sp, prompt_ids=[0], output_ids=[1, 3, 3])
    # token 0 (prompt, positive): 2/2; token 1 (output once, negative): -1*2 - 0.5 - 0.25;
    # token 3 (output twice, positive): 3/2 - 2*0.5 - 0.25; tokens 2 and 4 untouched.
    assert torch.allclose(out, torch.tensor([1.0, -2.75, 0.5, 0.25, 1.0]))
    assert torch.equal(logits, torch.tensor([2.0, -1.0, 0.5, 3.0, 1.0])), "the input must not be modified"


def test_min_p_keeps_tokens_within_the_ratio():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    kept = torch.isfinite(apply_min_p(logits, 0.3))
    assert kept.tolist() == [True, True, True, False]  # 0.15 >= 0.3*0.5, 0.05 < 0.15
    assert torch.equal(apply_min_p(logits, 0.0), logits)


def test_min_tokens_masks_eos_and_stop_token_ids_until_reached():
    logits = torch.tensor([[0.0, 5.0, 4.0, 1.0]])  # eos=1 best, stop token 2 next, then 3
    sp = SamplingParams(temperature=0, min_tokens=2, stop_token_ids=[2])
    assert sample(logits, [sp], [None], [_req([0], [3], eos=1)]) == [3]  # 1 output < 2: masked
    assert sample(logits, [sp], [None], [_req([0], [3, 3], eos=1)]) == [1]  # reached: EOS allowed
    ignore = SamplingParams(temperature=0, min_tokens=2, ignore_eos=True)
    # ignore_eos too: vLLM 0.32.0 adds EOS to all_stop_token_ids whatever ignore_eos says (sampling_params.py:781-784),
    # so min_tokens masks it until reached (found by tests/twin/test_output_fuzz.py)
    assert sample(logits, [ignore], [None], [_req([0], [3], eos=1)]) == [2]
    assert sample(logits, [ignore], [None], [_req([0], [3, 3], eos=1)]) == [1]


def test_greedy_rows_without_features_are_a_plain_argmax():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    sp = SamplingParams(temperature=0)
    reqs = [_req([1, 2], [3]) for _ in range(3)]
    assert sample(logits, [sp] * 3, [None] * 3, reqs) == logits.argmax(-1).tolist()


def test_repetition_penalty_changes_the_greedy_choice():
    logits = torch.tensor([[3.0, 2.0, 0.0]])
    sp = SamplingParams(temperature=0, repetition_penalty=2.0)
    assert sample(logits, [sp], [None], [_req([2], [])]) == [0]
    assert sample(logits, [sp], [None], [_req([0], [])]) == [1]  # 3/2 < 2


def test_top_logprobs_ranks_and_sampled_token():
    logits = torch.tensor([1.0, 3.0, 2.0, 0.0])
    lp = torch.log_softmax(logits, -1)
    got = top_logprobs(logits, token=3, k=2)
    assert list(got) == [3, 1, 2]  # sampled token first, then the top 2
    assert [got[t].rank for t in (3, 1, 2)] == [4, 1, 2]
    assert all(math.isclose(got[t].logprob, float(lp[t]), rel_tol=1e-6) for t in got)
    assert list(top_logprobs(logits, token=1, k=2)) == [1, 2]  # sampled token is in the top k
    assert len(top_logprobs(logits, token=0, k=-1)) == 4
    assert list(top_logprobs(logits, token=0, k=0)) == [0]
