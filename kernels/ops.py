"""The Triton kernels under the reference's names (backend selection: ``pagedlab.kernels.backends``,
which imports this module; this module does not import it back).

``pagedlab.kernels.ops.paged_decode_attention`` and friends have the same signatures
and semantics as the PyTorch references in ``pagedlab.kernels.reference``, so the engine switches
backend by switching module. The ``triton_*`` names are aliases for code that wants to be explicit.

Importing this module imports Triton. On CPU set ``TRITON_INTERPRET=1`` before Triton is first
imported (see ``pagedlab.kernels.runtime``).
"""

from __future__ import annotations

from pagedlab.kernels.cache_write import reshape_and_cache
from pagedlab.kernels.decode_attention import choose_num_splits, paged_decode_attention
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.prefill_attention import paged_prefill_attention
from pagedlab.kernels.runtime import KernelUnavailableError, interpreter_ready, interpreter_requested, kernels_can_run
from pagedlab.kernels.validate import validate_cache_write_inputs, validate_decode_inputs, validate_prefill_inputs

triton_reshape_and_cache = reshape_and_cache
triton_paged_decode_attention = paged_decode_attention
triton_paged_prefill_attention = paged_prefill_attention

__all__ = [
    "PagedKV",
    "reshape_and_cache",
    "paged_decode_attention",
    "paged_prefill_attention",
    "triton_reshape_and_cache",
    "triton_paged_decode_attention",
    "triton_paged_prefill_attention",
    "validate_cache_write_inputs",
    "validate_decode_inputs",
    "validate_prefill_inputs",
    "kernels_can_run",
    "interpreter_requested",
    "interpreter_ready",
    "KernelUnavailableError",
    "choose_num_splits",
]
