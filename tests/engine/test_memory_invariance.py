"""The memory system never changes the answer (DESIGN.md, engines.md §6.13).

Every configuration below must give HF transformers' greedy tokens for all 16 real prompts:
prefix caching off / hash chain / radix tree, block sizes 1, 16 and 32, token budgets 16,
64 and 512, static and continuous batching, forced recompute and forced swap preemption.
"""

import pytest

pytestmark = pytest.mark.model

from tests.engine.helpers import MAX_NEW, assert_same_tokens, run_engine


@pytest.mark.parametrize("caching", ["off", "hash", "radix"])
def test_prefix_caching_does_not_change_outputs(real_prompts, hf_greedy, caching):
    from pagedlab import SamplingParams

    kw = {} if caching == "off" else {"enable_prefix_caching": True, "prefix_cache": caching}
    llm, outs = run_engine(real_prompts, num_gpu_blocks=256, **kw)
    assert_same_tokens(outs, hf_greedy, f"prefix cache {caching}, first wave")
    # A second wave of the same prompts: everything but the last block of each prompt is cached
    # (hash chain: published while running; radix tree: inserted when the first wave finished).
    again = llm.generate(
        [{"prompt_token_ids": p} for p in real_prompts], SamplingParams(temperature=0, max_tokens=MAX_NEW)
    )
    assert_same_tokens(again, hf_greedy, f"prefix cache {caching}, second wave")
    cached = sum(o.num_cached_tokens for o in again)
    if caching == "off":
        assert cached == 0
    else:
        full = sum((len(p) - 1) // 16 * 16 for p in real_prompts)
        assert cached == full, f"second wave served {cached} cached tokens, expected every full block ({full})"
    assert llm.llm_engine.kv_cache_manager.num_free_blocks == 256


@pytest.mark.parametrize("block_size", [1, 16, 32])
def test_block_size_does_not_change_outputs(real_prompts, hf_greedy, block_size):
    _, outs = run_engine(real_prompts, block_size=block_size, num_gpu_blocks=4096 // block_size)
    assert_same_tokens(outs, hf_greedy, f"block_size {block_size}")


@pytest.mark.parametrize("budget", [16, 64, 512])
def test_token_budget_does_not_change_outputs(real_prompts, hf_greedy, budget):
    llm, outs = run_engine(real_prompts, num_gpu_blocks=256, max_num_batched_tokens=budget)
    assert_same_tokens(outs, hf_greedy, f"budget {budget}")
    assert max(s.num_prefill_tokens + s.num_decode_tokens for s in llm.llm_engine.step_stats) <= budget


def test_static_batching_gives_same_outputs(real_prompts, hf_greedy):
    llm, outs = run_engine(real_prompts, num_gpu_blocks=256, max_num_seqs=6, scheduling="static")
    assert_same_tokens(outs, hf_greedy, "static batching")
    # A static batch admits nobody until every member has finished.
    stats = llm.llm_engine.step_stats
    first, last = {}, {}
    for s in stats:
        for rid, _, _ in s.scheduled:
            first.setdefault(rid, s.step)
            last[rid] = s.step
    for r, f in first.items():
        assert all(last[q] < f for q, fq in first.items() if fq < f), f"{r} joined a batch still running"
    assert max(len(s.scheduled) for s in stats) <= 6


def test_forced_recompute_preemption_gives_same_outputs(real_prompts, hf_greedy):
    llm, outs = run_engine(real_prompts, num_gpu_blocks=40, max_num_batched_tokens=128)
    assert sum(o.pagedlab_metrics.num_preemptions for o in outs) > 0, "the pool was meant to force preemption"
    assert_same_tokens(outs, hf_greedy, "recompute preemption")
    assert llm.llm_engine.kv_cache_manager.num_free_blocks == 40, "blocks leaked after all requests finished"


def test_forced_swap_preemption_gives_same_outputs(real_prompts, hf_greedy):
    llm, outs = run_engine(
        real_prompts, num_gpu_blocks=40, num_cpu_blocks=80, preemption_mode="swap", max_num_batched_tokens=128
    )
    stats = llm.llm_engine.step_stats
    assert any(s.swapped for s in stats), "the pool was meant to force swapping"
    assert_same_tokens(outs, hf_greedy, "swap preemption")
    assert llm.llm_engine.kv_cache_manager.num_free_blocks == 40


def test_prefix_caching_with_preemption_gives_same_outputs(real_prompts, hf_greedy):
    # A preempted request re-hits its own freed blocks when resumed (bug B8, docs/bugs.md#b8).
    llm, outs = run_engine(real_prompts, num_gpu_blocks=40, max_num_batched_tokens=128, enable_prefix_caching=True)
    assert sum(o.pagedlab_metrics.num_preemptions for o in outs) > 0
    assert_same_tokens(outs, hf_greedy, "prefix caching + recompute preemption")


def test_parallel_sampling_shares_prompt_blocks(real_prompts):
    from pagedlab import LLMEngine, SamplingParams

    engine = LLMEngine(num_gpu_blocks=64)
    prompt = real_prompts[12]  # a long prompt: several full blocks
    engine.add_request("p", {"prompt_token_ids": prompt}, SamplingParams(n=4, temperature=0, max_tokens=8))
    kv = engine.kv_cache_manager
    while len(engine.output_processor.groups["p"].members) < 4:
        engine.step()
    tables = [kv.get_block_ids(m.request_id) for m in engine.output_processor.groups["p"].members]
    full = len(prompt) // 16
    for b in tables[0][:full]:
        assert kv.block_pool.blocks[b].ref_cnt == 4, "full prompt blocks must be shared by all 4 completions"
    assert all(t[:full] == tables[0][:full] for t in tables)
    outs = []
    while engine.has_unfinished_requests():
        outs += [o for o in engine.step() if o.finished]
    texts = [c.token_ids for c in outs[0].outputs]
    assert len(texts) == 4 and all(t == texts[0] for t in texts), "n=4 greedy must give 4 identical completions"
    assert kv.num_free_blocks == 64
