"""Test helpers for the paged kernels: random paged caches with shuffled block tables, tolerances.

Used by ``tests/kernels`` and handy in a lab to look at a block table. Imports torch only.
"""

from __future__ import annotations

import os

import torch

from pagedlab.kernels.paged_kv import PagedKV

#: Block-table entries past a sequence's length: an id far outside the cache. The kernels must never
#: read them (the host check only looks at entries in use).
PAD_ID = 1_000_000

#: (atol, rtol) against the fp32 reference. fp16/bf16 error is dominated by rounding the output and
#: by P being cast to the KV dtype before P @ V.
TOLERANCE = {torch.float32: (2e-5, 1e-5), torch.float16: (3e-3, 3e-3), torch.bfloat16: (2.5e-2, 2e-2)}


def default_device() -> str:
    """``"cuda"`` when a GPU is usable natively (interpreter off), else ``"cpu"`` (interpreted)."""
    interpret = os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")
    return "cuda" if torch.cuda.is_available() and not interpret else "cpu"


class PagedCase:
    """Random K/V for a batch of sequences stored in a paged cache with a shuffled block table.

    ``key_cache``/``value_cache`` hold NaN in every slot that no sequence owns (free blocks, rows past
    a sequence's length, the tail of its last block): a kernel that reads them without a load mask
    returns NaN. ``clean_key_cache``/``clean_value_cache`` hold zeros there instead, for the reference
    (whose masked SDPA would turn ``0 * NaN`` into NaN as well). Table entries past a sequence's
    blocks hold :data:`PAD_ID`, far outside the cache.

    Args:
        seq_lens: tokens per sequence (0 allowed).
        layout: ``"NHD"`` (``[blocks, bs, Hkv, D]`` in memory) or ``"HND"`` (``[blocks, Hkv, bs, D]`` in
            memory, handed over as an NHD-shaped view with other strides).
        k_seqs, v_seqs: optional logical K/V per sequence (default: random); used to store the same
            data under different block sizes.
    """

    def __init__(
        self,
        seq_lens,
        num_kv_heads,
        head_dim,
        block_size,
        dtype,
        *,
        extra_blocks=3,
        seed=0,
        device=None,
        layout="NHD",
        k_seqs=None,
        v_seqs=None,
    ):
        device = device or default_device()
        gen = torch.Generator().manual_seed(seed)
        self.seq_lens_list = [int(n) for n in seq_lens]
        self.block_size = block_size
        blocks_per_seq = [-(-n // block_size) for n in self.seq_lens_list]
        self.num_blocks = num_blocks = sum(blocks_per_seq) + extra_blocks
        max_blocks = max(blocks_per_seq, default=0) + 1  # +1: a padding column
        perm = torch.randperm(num_blocks, generator=gen)
        table = torch.full((len(seq_lens), max_blocks), PAD_ID, dtype=torch.int32)
        # One logical [seq_len, Hkv, D] tensor per sequence (given, or random), scattered into blocks.
        self.k_seqs = k_seqs or [
            torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype) for n in self.seq_lens_list
        ]
        self.v_seqs = v_seqs or [
            torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype) for n in self.seq_lens_list
        ]
        flat_k = torch.zeros(num_blocks * block_size, num_kv_heads, head_dim, dtype=dtype)
        flat_v = torch.zeros_like(flat_k)
        owned = torch.zeros(num_blocks * block_size, dtype=torch.bool)
        start = 0
        for s, n in enumerate(self.seq_lens_list):
            ids = perm[start : start + blocks_per_seq[s]]
            start += blocks_per_seq[s]
            table[s, : len(ids)] = ids.to(torch.int32)
            pos = torch.arange(n)
            slots = ids[pos // block_size] * block_size + pos % block_size
            flat_k[slots], flat_v[slots], owned[slots] = self.k_seqs[s], self.v_seqs[s], True
        shape = (num_blocks, block_size, num_kv_heads, head_dim)
        self.clean_key_cache = flat_k.view(shape).to(device)
        self.clean_value_cache = flat_v.view(shape).to(device)
        flat_k, flat_v = flat_k.clone(), flat_v.clone()
        flat_k[~owned] = float("nan")
        flat_v[~owned] = float("nan")
        kc, vc = flat_k.view(shape), flat_v.view(shape)
        if layout == "HND":
            kc, vc = kc.transpose(1, 2).contiguous().transpose(1, 2), vc.transpose(1, 2).contiguous().transpose(1, 2)
        self.key_cache, self.value_cache = kc.to(device), vc.to(device)
        self.block_tables = table.to(device)
        self.seq_lens = torch.tensor(self.seq_lens_list, dtype=torch.int32, device=device)

    def kv(self, cu_seqlens_q: torch.Tensor | None = None, *, clean: bool = False) -> PagedKV:
        """The case as the ops' :class:`PagedKV` (the NaN-poisoned caches, or the zeroed ones when ``clean``)."""
        kc, vc = (self.clean_key_cache, self.clean_value_cache) if clean else (self.key_cache, self.value_cache)
        return PagedKV(kc, vc, self.block_tables, self.seq_lens, cu_seqlens_q)

    @staticmethod
    def cu_seqlens(q_lens, device=None) -> torch.Tensor:
        """int32 prefix sums ``[0, q0, q0+q1, ...]``."""
        out = [0]
        for n in q_lens:
            out.append(out[-1] + int(n))
        return torch.tensor(out, dtype=torch.int32, device=device or default_device())


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    """No NaN, and within :data:`TOLERANCE` of the reference for ``dtype``."""
    atol, rtol = TOLERANCE[dtype]
    assert not torch.isnan(actual).any(), "NaN in the kernel output"
    torch.testing.assert_close(actual.float().cpu(), expected.float().cpu(), atol=atol, rtol=rtol)
