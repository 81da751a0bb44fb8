"""Model specifications: the few numbers a serving cost model needs.

Architectures are the published Hugging Face ``config.json`` values:

* Llama-2-7B (``meta-llama/Llama-2-7b-hf``): 32 layers, hidden 4096, 32 heads, 32 KV heads,
  intermediate 11008, vocab 32000 - 6.74 B parameters. Vidur profiled this one.
* LLaMA-13B (``huggyllama/llama-13b``; Llama-2-13B is the same shape): 40 layers, hidden 5120,
  40 heads (MHA), intermediate 13824, vocab 32000 - 13.0 B. KV 800 KB/token in fp16, the vLLM
  paper's OPT-13B figure (same layers x hidden).
* Llama-2-70B (``meta-llama/Llama-2-70b-hf``): 80 layers, hidden 8192, 64 heads, 8 KV heads
  (GQA), intermediate 28672, vocab 32000 - 69.0 B.
* LLaMA-3-70B (``meta-llama/Meta-Llama-3-70B``): as Llama-2-70B with vocab 128256 - 70.6 B;
  KV 320 KB/token.
* LLaMA-3-8B (``meta-llama/Meta-Llama-3-8B``): 32 layers, hidden 4096, 32 heads, 8 KV heads,
  intermediate 14336, vocab 128256 - 8.0 B; KV 128 KB/token.
* SmolLM2-135M (``HuggingFaceTB/SmolLM2-135M-Instruct``): 30 layers, hidden 576, 9 heads,
  3 KV heads, head_dim 64, intermediate 1536, vocab 49152, tied embeddings - 134.5 M. pagedlab
  serves it in fp32 on CPU, so its spec uses 4-byte elements (KV 46,080 B/token).

Parameter counts are computed from the shapes (gated MLP, RMSNorm weights, untied LM head
unless ``tie_word_embeddings``), so they match the model cards to three digits.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only Llama-style transformer.

    Attributes:
        name: short name.
        num_layers, hidden_size, num_heads, num_kv_heads, head_dim, intermediate_size,
        vocab_size: the architecture.
        tie_word_embeddings: the LM head reuses the embedding matrix.
        dtype_bytes: bytes per weight and per KV element (2 for bf16/fp16 on a GPU).
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    dtype_bytes: int = 2

    @property
    def params_per_layer(self) -> int:
        """Weights of one block: q, k, v, o projections, gated MLP (3 matrices), two RMSNorms."""
        h = self.hidden_size
        q = self.num_heads * self.head_dim
        kv = self.num_kv_heads * self.head_dim
        return h * q + 2 * h * kv + q * h + 3 * h * self.intermediate_size + 2 * h

    @property
    def num_linear_params(self) -> int:
        """Parameters every token multiplies through: all layers (not the embedding lookup, not the LM head)."""
        return self.num_layers * self.params_per_layer + self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        """All parameters (embedding + layers + final norm + LM head unless tied)."""
        emb = self.vocab_size * self.hidden_size
        return emb + self.num_linear_params + (0 if self.tie_word_embeddings else self.lm_head_params)

    @property
    def weight_bytes(self) -> int:
        return self.num_params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes per token: 2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes


LLAMA_2_7B = ModelSpec("llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000)
LLAMA_13B = ModelSpec("llama-13b", 40, 5120, 40, 40, 128, 13824, 32000)
LLAMA_2_70B = ModelSpec("llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000)
LLAMA_3_70B = ModelSpec("llama-3-70b", 80, 8192, 64, 8, 128, 28672, 128256)
LLAMA_3_8B = ModelSpec("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256)
SMOLLM2_135M = ModelSpec("smollm2-135m", 30, 576, 9, 3, 64, 1536, 49152, tie_word_embeddings=True, dtype_bytes=4)

MODELS: dict[str, ModelSpec] = {
    m.name: m for m in (LLAMA_2_7B, LLAMA_13B, LLAMA_2_70B, LLAMA_3_70B, LLAMA_3_8B, SMOLLM2_135M)
}
MODELS.update({"7b": LLAMA_2_7B, "13b": LLAMA_13B, "70b": LLAMA_2_70B, "llama-2-13b": LLAMA_13B})


def get_model(name: str) -> ModelSpec:
    """Look up a model by name, case-insensitive ("llama-2-7b", "13b", "llama-3-70b", ...).

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    key = name.strip().lower()
    if key not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    return MODELS[key]
