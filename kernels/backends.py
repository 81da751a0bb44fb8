"""The one attention-backend dispatch: which module's ops run attention over the paged cache.

A backend is the three ops the engine calls per layer, with the same positional signatures and
semantics in both (see ``pagedlab.kernels.reference``):

* ``"torch"``  - the PyTorch references (ground truth; the CPU default). Never imports Triton.
* ``"triton"`` - the Triton kernels (CUDA, or CPU under ``TRITON_INTERPRET=1``). Triton is imported
  on the first ``get_backend("triton")``, not before: it decides at import whether it interprets.
* ``"cpu"``    - the engine's CPU path (``pagedlab.kernels.cpu``): the references' results with less
  memory traffic (decodes grouped by length, causal prefill without a mask). Never imports Triton.

(vLLM >= 0.6 selects its backend with ``get_attn_backend`` in ``vllm/attention/selector.py``; this is
the same idea with two backends.)
"""
from __future__ import annotations

from types import SimpleNamespace

import torch

from pagedlab.kernels import reference

__all__ = ["BACKENDS", "get_backend", "default_backend"]

#: The backend names.
BACKENDS = ("torch", "triton", "cpu")


def get_backend(name: str) -> SimpleNamespace:
    """The three attention ops of a backend: ``reshape_and_cache``, ``paged_decode_attention``,
    ``paged_prefill_attention``.

    Raises:
        ValueError: unknown backend name.
        ImportError: ``"triton"`` where Triton is not installed.
    """
    if name == "torch":
        mod = reference
    elif name == "cpu":
        from pagedlab.kernels import cpu as mod
    elif name == "triton":
        from pagedlab.kernels import ops  # lazily: imports Triton (set TRITON_INTERPRET=1 first on CPU)
        mod = ops
    else:
        raise ValueError(f"unknown attention backend {name!r}; use one of {', '.join(map(repr, BACKENDS))}")
    return SimpleNamespace(reshape_and_cache=mod.reshape_and_cache, paged_decode_attention=mod.paged_decode_attention,
                           paged_prefill_attention=mod.paged_prefill_attention)


def default_backend(device: torch.device | str) -> str:
    """``"triton"`` on CUDA when Triton is usable (else ``"torch"``); ``"cpu"`` on any other device.

    Does not import Triton for a non-CUDA device.
    """
    if torch.device(device).type != "cuda":
        return "cpu"
    from pagedlab.kernels.runtime import kernels_can_run

    return "triton" if kernels_can_run(device) else "torch"
