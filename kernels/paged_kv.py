"""The paged-attention inputs every backend op takes: one frozen object, its shapes documented once.

Every attention op of every backend (``reference``, ``cpu``, the Triton ``decode_attention`` and
``prefill_attention``, ``pagedlab.model.attention.tiled_decode_attention``) is called as
``op(query, kv, scale, ...)`` with ``kv`` a :class:`PagedKV`: the layer's K/V cache and the step's
block tables and lengths. It plays the part of vLLM's ``PagedAttentionMetadata``
(``vllm/attention/ops/paged_attn.py``, vLLM 0.6: ``seq_lens_tensor``, ``block_tables``) plus the
layer's ``kv_cache`` that vLLM passes beside it. It is a frozen dataclass of existing tensors and
nothing more: building one allocates no tensor, so the engine builds one per layer and step.

Layout (vLLM's, per layer)::

    key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_dim]  fp16/bf16/fp32, any strides
    block_tables            int32/int64 [num_seqs, max_blocks_per_seq]
    seq_lens                int32/int64 [num_seqs]   KV length of each sequence after this step
    cu_seqlens_q            int32/int64 [num_seqs + 1] prefix sums of query lengths (prefill only)

Token position ``p`` of sequence ``s`` lives in block ``block_tables[s, p // block_size]``, row
``p % block_size``. Table entries past ``ceil(seq_len / block_size)`` are padding: no op reads them.
Checks (``pagedlab.kernels.validate``) raise ``KernelInputError`` naming the wrong field.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pagedlab.errors import KernelInputError

__all__ = ["PagedKV", "kit_slot_mapping"]


@dataclass(frozen=True, slots=True)
class PagedKV:
    """One layer's paged K/V cache and the step's block tables and lengths (shapes: module docstring).

    ``cu_seqlens_q`` is set for prefill/extend attention only (decode has one query per sequence).
    """

    key_cache: torch.Tensor
    value_cache: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    cu_seqlens_q: torch.Tensor | None = None

    @property
    def num_seqs(self) -> int:
        """Sequences in the batch (``seq_lens.shape[0]``)."""
        return int(self.seq_lens.shape[0])

    # The cache's shape, [num_blocks, block_size, num_kv_heads, head_dim], one read-only int each.
    num_blocks = property(lambda self: int(self.key_cache.shape[0]), doc="Blocks in the cache.")
    block_size = property(lambda self: int(self.key_cache.shape[1]), doc="Tokens per block.")
    num_kv_heads = property(lambda self: int(self.key_cache.shape[2]), doc="KV heads.")
    head_dim = property(lambda self: int(self.key_cache.shape[3]), doc="Elements per head.")

    def strides(self) -> tuple[int, ...]:
        """The 10 strides a Triton kernel takes after its pointers, in element units: the key cache's
        ``(block, slot, head, dim)``, the value cache's, and the block table's ``(seq, block)``."""
        return (*self.key_cache.stride(), *self.value_cache.stride(), *self.block_tables.stride())

    def query_starts(self) -> list[int]:
        """``cu_seqlens_q`` as a Python list (one host sync on CUDA).

        Raises:
            KernelInputError: ``cu_seqlens_q`` is not set (a decode batch handed to prefill).
        """
        return [int(n) for n in self.prefill_cu_seqlens().tolist()]

    def prefill_cu_seqlens(self) -> torch.Tensor:
        """``cu_seqlens_q``, which prefill/extend attention needs.

        Raises:
            KernelInputError: it is None.
        """
        if self.cu_seqlens_q is None:
            raise KernelInputError("prefill attention needs PagedKV.cu_seqlens_q (the query prefix sums); it is None")
        return self.cu_seqlens_q

    def select(self, start: int, stop: int | None = None) -> PagedKV:
        """Sequences ``[start, stop)`` as a :class:`PagedKV` of views (``cu_seqlens_q`` rebased to 0).

        The same cache; block tables and lengths are row views, so nothing is allocated but the rebased
        ``cu_seqlens_q`` (``cu[start:stop + 1] - cu[start]``; a view when ``start == 0``, as ``cu[0]`` is 0).
        """
        end = self.num_seqs if stop is None else stop
        cu = self.cu_seqlens_q
        if cu is not None:
            cu = cu[: end + 1] if start == 0 else cu[start : end + 1] - cu[start]
        return PagedKV(self.key_cache, self.value_cache, self.block_tables[start:end], self.seq_lens[start:end], cu)


def kit_slot_mapping(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
    """The flat KV slot of each position, ``block_table[pos // block_size] * block_size + pos % block_size``
    (vLLM's slot mapping, in plain Python: the ``slot_mapping`` slot's kit part; ``ModelRunner`` computes
    the same for a whole batch with tensors)."""
    return [block_table[p // block_size] * block_size + p % block_size for p in positions]
