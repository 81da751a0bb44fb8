"""oneDNN-packed linear layers (pagedlab.model.cpu_linear): same function as nn.Linear, reversible, wired in."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pagedlab.engine.model_runner import ModelRunner
from pagedlab.model.attention import AttentionMetadata
from pagedlab.model.cpu_linear import (
    PackedDecoderLayer,
    PackedLinear,
    apply_rope_flipped,
    onednn_available,
    pack_linears,
    padded_rows,
    single_threaded,
    unpack_linears,
)
from pagedlab.model.llama import ForwardContext, LlamaDecoderLayer, LlamaForCausalLM, apply_rope, rope_cos_sin
from tests.kernels.test_engine_triton import tiny_llama

pytestmark = pytest.mark.skipif(not onednn_available(), reason="this torch build has no oneDNN")


@pytest.mark.parametrize("shape", [(0, 64), (1, 64), (7, 64), (17, 64), (100, 64), (3, 5, 64)])
def test_packed_linear_computes_x_times_weight_transposed(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    w, x = torch.randn(40, 64), torch.randn(*shape)
    lin = PackedLinear(w)
    y = lin(x)
    assert y.shape == (*shape[:-1], 40) and y.dtype == torch.float32
    torch.testing.assert_close(y, x.double().matmul(w.double().t()).float(), rtol=1e-5, atol=1e-5)
    back = lin.to_linear()
    assert isinstance(back, nn.Linear) and back.bias is None and torch.equal(back.weight, w)
    shared = PackedLinear(w, pack=False)
    assert shared.packed.data_ptr() == w.data_ptr()  # no copy
    torch.testing.assert_close(shared(x), y, rtol=1e-5, atol=1e-5)


def test_rows_are_padded_to_few_shapes_and_the_padding_never_shows() -> None:
    """oneDNN compiles a kernel per shape: an engine's steps run 1..budget rows, padded to few sizes
    (issue 26: unpadded, the process grew by ~0.35 MB per new row count)."""
    sizes = [padded_rows(t) for t in range(1, 513)]
    assert all(t <= p <= t + max(t // 8, 0) for t, p in zip(range(1, 513), sizes))
    assert sizes[:16] == list(range(1, 17)) and len(set(sizes)) == 56
    torch.manual_seed(0)
    w, x, other = torch.randn(40, 64), torch.randn(33, 64), torch.randn(33, 40)
    lin = PackedLinear(w)
    ref = x.double().matmul(w.double().t())
    torch.testing.assert_close(lin(x), ref.float(), rtol=1e-5, atol=1e-5)
    y = lin.binary(x, other, "add")
    assert y.shape == (33, 40)
    torch.testing.assert_close(y, (ref + other.double()).float(), rtol=1e-5, atol=1e-5)


def test_packed_linear_rejects_what_it_cannot_pack() -> None:
    for dtype in (torch.float64, torch.float16):
        with pytest.raises(RuntimeError, match=rf"2-D fp32 or bf16 CPU weight, got \(4, 4\) {dtype}"):
            PackedLinear(torch.randn(4, 4, dtype=dtype))
    with pytest.raises(RuntimeError, match=r"got \(4,\) torch.float32"):
        PackedLinear(torch.randn(4))


def _prefill_logits(net: LlamaForCausalLM, ids: list[int]) -> torch.Tensor:
    """Logits of every position of one sequence run as a single prefill (block size 4)."""
    n, bs = len(ids), 4
    nb = (n + bs - 1) // bs
    cfg = net.config
    shape = (nb, bs, cfg.num_key_value_heads, cfg.head_dim)
    caches = [(torch.zeros(shape), torch.zeros(shape)) for _ in range(cfg.num_hidden_layers)]
    meta = AttentionMetadata(
        slot_mapping=torch.arange(n),
        block_tables=torch.arange(nb, dtype=torch.int32)[None],
        seq_lens=torch.tensor([n], dtype=torch.int32),
        cu_seqlens_q=torch.tensor([0, n], dtype=torch.int32),
        num_decodes=0,
        logits_indices=torch.arange(n),
    )
    return net(torch.tensor(ids), torch.arange(n), caches, meta)


def test_pack_and_unpack_a_model_in_place() -> None:
    net = tiny_llama()
    plain = {k: v.clone() for k, v in net.state_dict().items()}
    ids = [5, 17, 3, 90, 41, 8, 8, 60, 2]
    want = _prefill_logits(net, ids)
    assert pack_linears(net) is True
    layer = net.layers[1]
    assert all(isinstance(m, PackedDecoderLayer) for m in net.layers)
    packed = [layer.qkv_proj, layer.o_proj, layer.gate_up_proj, layer.down_proj]
    assert all(isinstance(m, PackedLinear) for m in packed) and isinstance(net.packed_lm_head, PackedLinear)
    assert [(m.in_features, m.out_features) for m in packed] == [(64, 160), (96, 64), (64, 192), (96, 64)]
    assert torch.equal(net.embed_tokens.weight, plain["embed_tokens.weight"])  # lookups stay plain
    assert net.packed_lm_head.packed.data_ptr() == net.embed_tokens.weight.data_ptr()  # tied: no second copy
    got = _prefill_logits(net, ids)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    head = net.packed_lm_head
    assert pack_linears(net) is True and net.packed_lm_head is head and net.layers[1] is layer  # idempotent
    unpack_linears(net)
    assert all(type(m) is LlamaDecoderLayer for m in net.layers) and net.packed_lm_head is None
    assert isinstance(net.layers[0].mlp.down_proj, nn.Linear)
    after = net.state_dict()
    assert after.keys() == plain.keys() and all(torch.equal(after[k], plain[k]) for k in plain)
    assert torch.equal(_prefill_logits(net, ids), want)  # bit-exact round trip


def test_pack_linears_leaves_a_float64_model_alone() -> None:
    net = tiny_llama().double()
    assert pack_linears(net) is False
    assert isinstance(net.layers[0].self_attn.qkv_proj, nn.Linear) and net.packed_lm_head is None


def test_model_runner_packs_on_cpu_unless_told_not_to() -> None:
    net = tiny_llama()
    ModelRunner(net, block_size=4, num_gpu_blocks=8)
    assert isinstance(net.layers[0], PackedDecoderLayer) and net.packed_lm_head is not None
    ModelRunner(net, block_size=4, num_gpu_blocks=8, pack_linears=False)
    assert isinstance(net.layers[0].self_attn.o_proj, nn.Linear) and net.packed_lm_head is None


def test_the_rope_table_rows_equal_rope_cos_sin_at_those_positions() -> None:
    net = tiny_llama()
    cos_t, sin_t = net.rope_table(torch.device("cpu"))
    assert cos_t.shape == sin_t.shape == (256, 16)
    pos = torch.tensor([0, 1, 17, 17, 255, 5])
    cos, sin = rope_cos_sin(pos, 16, net.config.rope_theta)
    assert torch.equal(cos_t[pos], cos) and torch.equal(sin_t[pos], sin)
    assert net.rope_table(torch.device("cpu"))[0] is cos_t  # computed once


def test_rmsnorm_gives_hf_llama_rmsnorm_bits() -> None:
    from pagedlab.model.llama import RMSNorm

    torch.manual_seed(2)
    norm = RMSNorm(576, 1e-5)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(33, 576) * 3
    var = x.pow(2).mean(-1, keepdim=True)  # transformers' LlamaRMSNorm, fp32
    assert torch.equal(norm(x), norm.weight * (x * torch.rsqrt(var + 1e-5)))
    xb = x.to(torch.bfloat16)
    hf_b = norm.weight * (xb.float() * torch.rsqrt(xb.float().pow(2).mean(-1, keepdim=True) + 1e-5)).to(xb.dtype)
    assert torch.equal(norm(xb), hf_b)


@pytest.mark.parametrize("positions", [[0], [3, 700, 8191], list(range(40, 63))])
def test_flipped_rope_gives_apply_ropes_bits_on_strided_q_and_k(positions: list[int]) -> None:
    torch.manual_seed(5)
    qkv = torch.randn(len(positions), 15, 64) * 4  # 9 Q + 3 K + 3 V heads: Q and K are a strided view
    cos, sin = rope_cos_sin(torch.tensor(positions), 64, 100000.0)
    got = apply_rope_flipped(qkv[:, :12], cos, sin)
    assert got.shape == (len(positions), 12, 64) and got.is_contiguous()
    assert torch.equal(got, apply_rope(qkv[:, :12], cos, sin))
    assert torch.equal(got[:, :9], apply_rope(qkv[:, :9], cos, sin))  # per head: Q alone as in the model


def test_single_threaded_restores_the_thread_count_also_after_an_error() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with single_threaded():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with single_threaded(False):
            assert torch.get_num_threads() == 2
        with pytest.raises(ValueError, match="boom"), single_threaded():
            raise ValueError("boom")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("ids", [[5, 17, 3, 90, 41, 8, 8, 60, 2], [7]])
def test_the_packed_layer_computes_the_readable_layer(ids: list[int]) -> None:
    net = tiny_llama()
    readable = net.layers[0]
    torch.manual_seed(6)
    x = torch.randn(len(ids), net.config.hidden_size)
    n, bs = len(ids), 4
    cfg = net.config
    cos, sin = rope_cos_sin(torch.arange(n), cfg.head_dim, cfg.rope_theta)

    def run(layer: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        nb = -(-n // bs)
        kv = (
            torch.zeros(nb + 1, bs, cfg.num_key_value_heads, cfg.head_dim),
            torch.zeros(nb + 1, bs, cfg.num_key_value_heads, cfg.head_dim),
        )
        meta = AttentionMetadata(
            slot_mapping=torch.arange(n) + bs,  # block 0 unused: the write goes through the slots
            block_tables=torch.arange(1, nb + 1, dtype=torch.int32)[None],
            seq_lens=torch.tensor([n], dtype=torch.int32),
            cu_seqlens_q=torch.tensor([0, n], dtype=torch.int32),
            num_decodes=int(n == 1),
            logits_indices=torch.arange(n),
            backend="cpu",
        )
        with torch.inference_mode():
            return layer(x, kv, ForwardContext(cos, sin, meta)), kv[0], kv[1]

    want = run(readable)
    packed = PackedDecoderLayer(readable)
    got = run(packed)
    # The packed layer's C ops (RMSNorm's sum order, SiLU's exponential) round differently: measured, each
    # fp32 layer is ~3-4e-5 from the float64 layer on this input, so the two may differ by as much.
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=5e-5)
    assert torch.equal(got[1][0], torch.zeros_like(got[1][0]))  # nothing written outside the slots
    back = packed.to_layer(cfg)
    assert all(torch.equal(a, b) for a, b in zip(back.state_dict().values(), readable.state_dict().values()))


def test_loading_weights_into_a_packed_model_is_refused_until_it_is_unpacked() -> None:
    """The readable model does not know its packed variant (no import of cpu_linear in llama.py): a
    packed model is refused by name, and loads once unpacked."""
    net = tiny_llama()
    assert pack_linears(net) is True
    with pytest.raises(ValueError, match="packed for oneDNN: call pagedlab.model.cpu_linear.unpack_linears"):
        net.load_hf_state_dict({})
    unpack_linears(net)
    with pytest.raises(KeyError, match="model.embed_tokens.weight"):  # past the check: it reads the weights
        net.load_hf_state_dict({})
