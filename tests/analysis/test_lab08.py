"""pagedlab.analysis.lab08: paged vs contiguous decode attention, same keys and values (issue 23)."""

from __future__ import annotations

import pytest
import torch

from pagedlab.analysis.lab08 import PAPER_CLAIM, contiguous_kv, paged_overhead
from pagedlab.kernels import reference
from pagedlab.kernels.testing import PagedCase


def test_contiguous_storage_holds_the_same_attention_as_the_paged_cache():
    case = PagedCase([40, 40, 40], 3, 16, 8, torch.float32, seed=3, device="cpu")
    flat = contiguous_kv(case)
    assert flat.key_cache.is_contiguous() and flat.block_size == 40 and flat.block_tables.shape == (3, 1)
    q = torch.randn(3, 9, 16, generator=torch.Generator().manual_seed(0))
    paged = reference.paged_decode_attention(q, case.kv(clean=True), 0.25)
    torch.testing.assert_close(reference.paged_decode_attention(q, flat, 0.25), paged, atol=1e-6, rtol=1e-6)


def test_paged_overhead_times_both_paths_on_equal_outputs():
    r = paged_overhead(num_seqs=2, seq_len=64, block_size=8, rounds=3, calls=2)
    assert len(r.paged_s) == len(r.contiguous_s) == 3
    assert r.median_ratio > 0 and r.min_ratio > 0
    assert r.max_abs_diff < 1e-5
    text = r.report()
    assert f"median {r.median_ratio:.2f}x" in text and PAPER_CLAIM in text and r.backend in text


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one length"):
        contiguous_kv(PagedCase([8, 9], 1, 4, 4, torch.float32, device="cpu"))
    with pytest.raises(ValueError, match="rounds"):
        paged_overhead(rounds=0)
