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

Run from a checkout, this folder is also found as a *top-level* ``kernels`` (the current directory is on
``sys.path``), which would shadow the unrelated PyPI package ``kernels`` that transformers (and so vLLM)
import. Imported under that name, it hands over: it loads PyPI's ``kernels`` if one is installed, else
it leaves an empty stand-in with no file and no version, which transformers' availability check
(``is_kernels_available``) reads as "not installed", and whose every name raises ``ImportError``.
"""

if __name__ == "kernels":  # the checkout's folder found as PyPI's `kernels`: hand over, define nothing
    import importlib.machinery as _machinery
    import importlib.util as _util
    import os as _os
    import sys as _sys

    _checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _others = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != _checkout]
    _spec = _machinery.PathFinder.find_spec("kernels", _others)
    if _spec is not None and _spec.loader is not None:
        _real = _util.module_from_spec(_spec)
        _sys.modules["kernels"] = _real  # what `import kernels` returns once this file has run
        _spec.loader.exec_module(_real)
    else:
        import types as _types

        def _absent(name: str) -> object:
            raise AttributeError(
                f"PyPI's kernels package is not installed (kernels.{name}); the checkout's kernels/ folder is "
                "pagedlab.kernels"
            )

        _stub = _types.ModuleType("kernels", "PyPI's kernels is not installed (stand-in from pagedlab's checkout)")
        _stub.__spec__ = _machinery.ModuleSpec("kernels", None, is_package=True)
        _stub.__path__ = []
        _stub.__getattr__ = _absent  # type: ignore[method-assign]
        _sys.modules["kernels"] = _stub
else:
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
            # lazy: optional dependency (ops imports Triton, which decides at its first import whether it interprets)
            from pagedlab.kernels import ops

            return getattr(ops, name)
        raise AttributeError(f"module 'pagedlab.kernels' has no attribute {name!r}")
