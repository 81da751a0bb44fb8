"""One attention-backend dispatch (pagedlab.kernels.backends), used by the model and by kernels.ops."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from pagedlab.kernels import backends, ops, reference
from pagedlab.model.attention import AttentionMetadata, paged_attention


@pytest.mark.no_interpreter_needed
def test_the_torch_backend_never_imports_triton() -> None:
    code = (
        "import sys; from pagedlab.kernels.backends import get_backend, default_backend; "
        "b = get_backend('torch'); print(default_backend('cpu'), 'triton' in sys.modules, "
        "b.paged_decode_attention.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["cpu", "False", "pagedlab.kernels.reference"]


@pytest.mark.no_interpreter_needed
def test_the_package_reexports_the_one_dispatch() -> None:
    import pagedlab.kernels as k

    assert backends.get_backend is k.get_backend and backends.default_backend is k.default_backend
    assert not hasattr(ops, "get_backend")  # ops is a backend's module, not a second way in to the dispatch
    tri = backends.get_backend("triton")
    assert (tri.reshape_and_cache, tri.paged_decode_attention, tri.paged_prefill_attention) == (
        ops.reshape_and_cache,
        ops.paged_decode_attention,
        ops.paged_prefill_attention,
    )
    assert backends.get_backend("torch").paged_prefill_attention is reference.paged_prefill_attention


def _meta(backend: str) -> AttentionMetadata:
    return AttentionMetadata(
        slot_mapping=torch.tensor([0, 1], dtype=torch.int64),
        block_tables=torch.zeros((1, 1), dtype=torch.int32),
        seq_lens=torch.tensor([2], dtype=torch.int32),
        cu_seqlens_q=torch.tensor([0, 2], dtype=torch.int32),
        num_decodes=0,
        logits_indices=torch.tensor([1]),
        backend=backend,
    )


@pytest.mark.no_interpreter_needed
def test_paged_attention_dispatches_through_get_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    q = torch.randn(2, 2, 4)
    k, v = torch.randn(2, 1, 4), torch.randn(2, 1, 4)
    kc, vc = torch.zeros(1, 4, 1, 4), torch.zeros(1, 4, 1, 4)
    with pytest.raises(ValueError, match="unknown attention backend 'flash'; use one of 'torch', 'triton'"):
        paged_attention(q, k, v, kc, vc, _meta("flash"), 0.5)
    assert torch.count_nonzero(kc) == 0  # nothing written before the backend was known
    seen: list[str] = []

    def spy(name: str) -> object:
        seen.append(name)
        return backends.get_backend(name)

    monkeypatch.setattr("pagedlab.model.attention.get_backend", spy)
    out = paged_attention(q, k, v, kc, vc, _meta("torch"), 0.5)
    assert seen == ["torch"] and out.shape == (2, 2, 4)
    assert torch.equal(kc[0, :2, 0], k[:, 0]) and torch.equal(vc[0, :2, 0], v[:, 0])


@pytest.mark.no_interpreter_needed
def test_the_engine_validates_and_defaults_through_the_same_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    from pagedlab.engine.llm_engine import LLMEngine
    from pagedlab.errors import ConfigError
    from pagedlab.model.llama import LlamaConfig, LlamaForCausalLM

    def tiny() -> LlamaForCausalLM:
        torch.manual_seed(0)
        return LlamaForCausalLM(
            LlamaConfig(
                vocab_size=64,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=1,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=8,
                max_position_embeddings=64,
            )
        )

    with pytest.raises(ConfigError, match="attention_backend must be one of 'torch', 'triton', 'cpu', got 'flash'"):
        LLMEngine(tiny(), num_gpu_blocks=8, block_size=4, device="cpu", attention_backend="flash", eos_token_id=1)
    engine = LLMEngine(tiny(), num_gpu_blocks=8, block_size=4, device="cpu", eos_token_id=1)
    assert engine.model_runner.backend == backends.default_backend("cpu") == "cpu"
    asked: list[str] = []
    monkeypatch.setattr("pagedlab.engine.llm_engine.default_backend", lambda d: asked.append(d) or "triton")
    engine = LLMEngine(tiny(), num_gpu_blocks=8, block_size=4, device="cpu", eos_token_id=1)
    assert asked == ["cpu"] and engine.model_runner.backend == "triton"  # the engine asks the one dispatch
