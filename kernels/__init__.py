"""Paged-attention kernels (Triton) and their PyTorch references, imported as ``pagedlab.kernels``.

Modules:
    paged_kv           ``PagedKV``: the cache, block tables and lengths every attention op takes
    reference          PyTorch references (ground truth; the engine's CPU path). No Triton needed.
    validate           host-side input checks raising ``KernelInputError``. No Triton needed.
    runtime            can the kernels run here? (CUDA, or CPU under ``TRITON_INTERPRET=1``)
    decode_attention   Triton paged decode attention (GQA, split-KV + merge)
    prefill_attention  Triton paged prefill/extend attention (varlen, causal with context offset)
    cache_write        Triton ``reshape_and_cache`` through the slot mapping
    backends           the one backend dispatch: ``get_backend("torch"|"triton"|"cpu")``, ``default_backend``
    cpu                the engine's CPU attention (reference results, less memory traffic). No Triton.
    ops                the Triton ops under the reference's names
    aot                offline compile check for sm_80 / sm_90 without a GPU
    testing            random paged caches with shuffled tables and NaN-poisoned free slots (tests, labs)

Importing this package does **not** import Triton: Triton decides at its first import whether it
interprets (``TRITON_INTERPRET=1``) or compiles, so the choice is left to the first module that
needs it. The Triton names below are loaded lazily on first access.
"""

from pagedlab.kernels import reference
from pagedlab.kernels.backends import default_backend, get_backend
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.validate import validate_cache_write_inputs, validate_decode_inputs, validate_prefill_inputs

_LAZY = {
    "triton_reshape_and_cache",
    "triton_paged_decode_attention",
    "triton_paged_prefill_attention",
    "kernels_can_run",
    "KernelUnavailableError",
}

__all__ = [
    "reference",
    "PagedKV",
    "validate_cache_write_inputs",
    "validate_decode_inputs",
    "validate_prefill_inputs",
    "get_backend",
    "default_backend",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from pagedlab.kernels import ops

        return getattr(ops, name)
    raise AttributeError(f"module 'pagedlab.kernels' has no attribute {name!r}")
