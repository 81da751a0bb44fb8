"""PagedKV: the one parameter object of the attention ops (shape facts, launch strides, row selection)."""

from __future__ import annotations

import pytest
import torch

from pagedlab.errors import KernelInputError
from pagedlab.kernels.paged_kv import PagedKV

pytestmark = pytest.mark.no_interpreter_needed


def _kv(cu: list[int] | None = None) -> PagedKV:
    kc = torch.zeros(7, 4, 2, 8)  # 7 blocks of 4 tokens, 2 KV heads of 8
    vc = torch.zeros(7, 2, 4, 8).transpose(1, 2)  # HND memory, NHD view: other strides
    tables = torch.tensor([[3, 1], [2, 0], [5, 6]], dtype=torch.int32)
    lens = torch.tensor([6, 1, 8], dtype=torch.int32)
    return PagedKV(kc, vc, tables, lens, None if cu is None else torch.tensor(cu, dtype=torch.int32))


def test_shape_facts_and_the_launch_strides() -> None:
    kv = _kv()
    assert (kv.num_seqs, kv.num_blocks, kv.block_size, kv.num_kv_heads, kv.head_dim) == (3, 7, 4, 2, 8)
    # key cache (block, slot, head, dim), value cache (HND in memory), block table (seq, block)
    assert kv.strides() == (64, 16, 8, 1, 64, 8, 32, 1, 2, 1)


def test_it_is_frozen_and_holds_the_given_tensors() -> None:
    kv = _kv()
    with pytest.raises(AttributeError):
        kv.seq_lens = torch.zeros(3)  # type: ignore[misc]
    assert PagedKV(kv.key_cache, kv.value_cache, kv.block_tables, kv.seq_lens).key_cache is kv.key_cache


def test_select_gives_views_of_the_rows_and_rebases_the_query_prefix_sums() -> None:
    kv = _kv([0, 2, 3, 9])
    tail = kv.select(1)
    assert tail.key_cache is kv.key_cache and tail.value_cache is kv.value_cache
    assert tail.block_tables.tolist() == [[2, 0], [5, 6]] and tail.seq_lens.tolist() == [1, 8]
    assert tail.block_tables.data_ptr() == kv.block_tables[1].data_ptr()  # a view, not a copy
    assert tail.cu_seqlens_q is not None and tail.cu_seqlens_q.tolist() == [0, 1, 7]
    head = kv.select(0, 2)
    assert head.seq_lens.tolist() == [6, 1] and head.query_starts() == [0, 2, 3]
    middle = kv.select(1, 2)
    assert middle.num_seqs == 1 and middle.query_starts() == [0, 1]
    assert kv.select(3).num_seqs == 0 and kv.select(3).query_starts() == [0]
    assert _kv().select(1).cu_seqlens_q is None  # a decode batch stays without prefix sums


def test_prefill_prefix_sums_are_required() -> None:
    assert _kv([0, 1, 2, 3]).query_starts() == [0, 1, 2, 3]
    with pytest.raises(KernelInputError, match="cu_seqlens_q"):
        _kv().query_starts()
