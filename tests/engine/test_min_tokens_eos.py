"""``min_tokens`` holds EOS back even with ``ignore_eos=True``, as vLLM 0.32.0: ``update_from_generation_config``
adds EOS to ``all_stop_token_ids`` whatever ``ignore_eos`` says (``sampling_params.py:781-784``), and the
``MinTokensLogitsProcessor`` masks those (``v1/sample/logits_processor/builtin.py:204``). Found by the output twin
(``tests/twin/test_output_fuzz.py``: the kit sampled ``<|im_end|>`` as a chat's 2nd token under ``min_tokens=12``)."""

from __future__ import annotations

import math

import pytest
import torch

from pagedlab.model.sampler import _process_row
from pagedlab.request import Request
from pagedlab.sampling_params import SamplingParams

EOS = 2


@pytest.mark.parametrize("ignore_eos", [False, True])
def test_min_tokens_masks_eos_and_stop_token_ids(ignore_eos: bool) -> None:
    sp = SamplingParams(min_tokens=2, ignore_eos=ignore_eos, stop_token_ids=[5])
    req = Request("r", [1, 3, 4], sp, eos_token_id=EOS)
    row = _process_row(torch.zeros(8), sp, req)
    assert row[EOS] == -math.inf and row[5] == -math.inf
    assert torch.count_nonzero(row == -math.inf) == 2  # nothing else masked
    req.append_output_token_ids([6])
    req.append_output_token_ids([6])  # min_tokens reached: nothing masked
    assert torch.count_nonzero(_process_row(torch.zeros(8), sp, req) == -math.inf) == 0
