"""The one attention-backend dispatch: which module's ops run attention over the paged cache.

A backend is the three ops the engine calls per layer, with the same signatures and semantics in
all of them (see ``pagedlab.kernels.reference``): ``reshape_and_cache(key, value, key_cache,
value_cache, slot_mapping)``, ``paged_decode_attention(query, kv, scale)`` and
``paged_prefill_attention(query, kv, scale)``, ``kv`` a :class:`~pagedlab.kernels.paged_kv.PagedKV`:

* ``"torch"``  - the PyTorch references (ground truth; the CPU default). Never imports Triton.
* ``"triton"`` - the Triton kernels (CUDA, or CPU under ``TRITON_INTERPRET=1``). Triton is imported
  on the first ``get_backend("triton")``, not before: it decides at import whether it interprets.
* ``"cpu"``    - the engine's CPU path (``pagedlab.kernels.cpu``): the references' results with less
  memory traffic (decode attention and the cache write in C where ``pagedlab.kernels.native`` builds,
  else decodes grouped by length; causal prefill without a mask). Never imports Triton.

(vLLM >= 0.6 selects its backend with ``get_attn_backend`` in ``vllm/attention/selector.py``; this is
the same idea with three backends.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch

from pagedlab.kernels import cpu, reference

__all__ = ["BACKENDS", "AttentionBackend", "get_backend", "default_backend"]

#: The backend names.
BACKENDS = ("torch", "triton", "cpu")


@dataclass(frozen=True)
class AttentionBackend:
    """The three ops of one backend (signatures as in ``pagedlab.kernels.reference``)."""

    name: str
    reshape_and_cache: Callable[..., None]
    paged_decode_attention: Callable[..., torch.Tensor]
    paged_prefill_attention: Callable[..., torch.Tensor]
    #: ``(kv: PagedKV) -> plan``: per-step decode state (from ``kv``'s tables and lengths) that
    #: ``paged_decode_attention(query, kv, scale, plan=plan)`` reuses in every layer; None where a
    #: backend has none.
    plan_decode: Callable[..., object] | None = None


@functools.cache
def get_backend(name: str) -> AttentionBackend:
    """The three attention ops of a backend: ``reshape_and_cache``, ``paged_decode_attention``,
    ``paged_prefill_attention``. Built once per name (every layer of every step asks for it).

    Raises:
        ValueError: unknown backend name.
        ImportError: ``"triton"`` where Triton is not installed.
    """
    mod: ModuleType
    if name == "torch":
        mod = reference
    elif name == "cpu":
        mod = cpu
    elif name == "triton":
        # lazy: optional dependency (ops imports Triton; set TRITON_INTERPRET=1 first on CPU)
        from pagedlab.kernels import ops

        mod = ops
    else:
        raise ValueError(f"unknown attention backend {name!r}; use one of {', '.join(map(repr, BACKENDS))}")
    return AttentionBackend(
        name,
        mod.reshape_and_cache,
        mod.paged_decode_attention,
        mod.paged_prefill_attention,
        getattr(mod, "plan_decode", None),
    )


def default_backend(device: torch.device | str) -> str:
    """``"triton"`` on CUDA when Triton is usable (else ``"torch"``); ``"cpu"`` on any other device.

    Does not import Triton for a non-CUDA device.
    """
    if torch.device(device).type != "cuda":
        return "cpu"
    # lazy: optional dependency (runtime imports Triton; not imported for a non-CUDA device)
    from pagedlab.kernels.runtime import kernels_can_run

    return "triton" if kernels_can_run(device) else "torch"
