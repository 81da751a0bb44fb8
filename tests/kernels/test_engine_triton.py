"""The engine end to end with the Triton kernels (interpreter on CPU) equals the torch path."""

import pytest
import torch

from pagedlab.kernels.runtime import kernels_can_run
from pagedlab.model.llama import LlamaConfig, LlamaForCausalLM

pytestmark = pytest.mark.skipif(not kernels_can_run("cpu"), reason="triton is not installed")


def tiny_llama(seed=0):
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
    )
    torch.manual_seed(seed)
    net = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.5)
    return net.eval()


def run(backend, prompts, **kw):
    from pagedlab import LLMEngine, SamplingParams

    eng = LLMEngine(
        tiny_llama(),
        attention_backend=backend,
        block_size=4,
        num_gpu_blocks=64,
        max_model_len=128,
        max_num_batched_tokens=16,
        **kw,
    )
    for i, p in enumerate(prompts):
        eng.add_request(str(i), {"prompt_token_ids": p}, SamplingParams(temperature=0, max_tokens=5, ignore_eos=True))
    outs = []
    while eng.has_unfinished_requests():
        outs += [o for o in eng.step() if o.finished]
    stats = eng.step_stats
    return {o.request_id: o.outputs[0].token_ids for o in outs}, stats


def test_engine_triton_backend_matches_torch():
    g = torch.Generator().manual_seed(1)
    # Lengths around the block size (4): 1, 3, 4, 5, 9, and one long prompt chunked by the budget.
    prompts = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (1, 3, 4, 5, 9, 23)]
    prompts.append(prompts[4][:8] + [7, 8])  # shares two full blocks with prompt 4
    ref, ref_stats = run("torch", prompts, enable_prefix_caching=True)
    got, stats = run("triton", prompts, enable_prefix_caching=True)
    assert any(s.num_prefill_tokens and s.num_decode_tokens for s in stats), "no mixed prefill+decode step"
    assert got == ref
