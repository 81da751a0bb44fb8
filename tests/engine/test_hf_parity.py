"""pagedlab's own forward pass + paged KV cache must reproduce HF transformers' greedy tokens."""

from tests.engine.helpers import run_engine


def test_batched_greedy_matches_hf_generate(real_prompts, hf_greedy):
    # All 16 prompts submitted together: the first steps mix long prefills (chunked under the
    # 512-token budget) with decodes of the requests admitted earlier.
    llm, outs = run_engine(real_prompts, block_size=16, num_gpu_blocks=256, max_num_batched_tokens=256)
    stats = llm.llm_engine.step_stats
    assert any(s.num_prefill_tokens and s.num_decode_tokens for s in stats), "no step mixed prefill and decode"
    for i, (o, ref) in enumerate(zip(outs, hf_greedy)):
        assert o.outputs[0].token_ids == ref, f"prompt {i}: pagedlab {o.outputs[0].token_ids} != HF {ref}"


def test_first_answer_is_paris(real_prompts, hf_greedy, tokenizer):
    # DESIGN.md: greedy "What is the capital of France?" -> "The capital of France is Paris."
    assert tokenizer.decode(hf_greedy[0], skip_special_tokens=True).startswith("The capital of France is Paris.")
