"""Fork groups (n > 1) on the real engine: tracked structurally, swapped as a unit (issue 14).

vLLM v0 swapped a whole SequenceGroup, so blocks its sequences share are moved once and stay
shared; request ids are opaque strings (no '#' parsing).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.model

MAX = 24


def _params(n: int = 1):
    from pagedlab import SamplingParams

    return SamplingParams(temperature=0, max_tokens=MAX, n=n, ignore_eos=True)


def _drain(engine) -> dict:
    outs = {}
    while engine.has_unfinished_requests():
        for o in engine.step():
            outs[o.request_id] = [c.token_ids for c in o.outputs]
    return outs


def _gather(runner, block_ids: list[int], num_tokens: int, caches=None) -> torch.Tensor:
    """K and V of the first ``num_tokens`` positions seen through ``block_ids``, all layers."""
    caches = runner.kv_caches if caches is None else caches
    idx = torch.tensor(block_ids)
    return torch.stack([torch.cat([c.index_select(0, idx).flatten(0, 1)[:num_tokens] for c in kv]) for kv in caches])


def test_swap_moves_the_fork_group_whole_keeping_sharing_kv_and_outputs(real_prompts):
    from pagedlab import LLMEngine

    # 9 blocks of 16: x needs 4, the group 6 (2 shared prompt blocks + 2 each), so it gets swapped.
    eng = LLMEngine(num_gpu_blocks=9, num_cpu_blocks=32, preemption_mode="swap", trace=True)
    kv, runner, sched = eng.kv_cache_manager, eng.model_runner, eng.scheduler
    pre: dict[str, torch.Tensor] = {}
    held: list[int] = []
    checked: list[str] = []
    original = runner.apply_block_moves

    def apply_block_moves(out):
        if out.blocks_to_swap_out:  # KV of each swapped member, before it moves
            to_gpu = {c: g for g, c in out.blocks_to_swap_out}
            for rid, cpu_table in kv.req_to_cpu_blocks.items():
                req = sched.requests[rid]
                pre[rid] = _gather(runner, [to_gpu[c.block_id] for c in cpu_table], req.num_computed_tokens)
            held.append(len(out.blocks_to_swap_out))
        original(out)
        if out.blocks_to_swap_in:  # ... and after it came back to new blocks
            for rid in [rid for rid in pre if rid in kv.req_to_blocks]:
                n = pre[rid].shape[1] // 2
                got = _gather(runner, kv.get_block_ids(rid), n)
                assert torch.equal(got, pre[rid]), f"{rid}: KV changed across swap out + in"
                checked.append(rid)
            assert len(out.blocks_to_swap_in) == held[-1], "the group holds as many blocks as before"

    runner.apply_block_moves = apply_block_moves
    eng.add_request("x", {"prompt_token_ids": real_prompts[1]}, _params())
    eng.add_request("g", {"prompt_token_ids": real_prompts[0]}, _params(n=2))
    outs = _drain(eng)
    swaps = [
        (e["kind"], sorted(e["request_ids"]), len(e["mapping"]))
        for e in eng.tracer.events
        if e["kind"] in ("swap_out", "swap_in")
    ]
    assert swaps and all(ids == ["g", "g#1"] for _, ids, _ in swaps), swaps
    assert [m for k, _, m in swaps if k == "swap_out"] == [m for k, _, m in swaps if k == "swap_in"]
    assert set(checked) == {"g", "g#1"}
    assert kv.num_free_blocks == 9 and kv.cpu_block_pool.get_num_free_blocks() == 32

    ref = LLMEngine(num_gpu_blocks=64)  # nothing preempted
    ref.add_request("x", {"prompt_token_ids": real_prompts[1]}, _params())
    ref.add_request("g", {"prompt_token_ids": real_prompts[0]}, _params(n=2))
    assert outs == _drain(ref)


def test_any_string_is_a_request_id(real_prompts):
    from pagedlab import LLMEngine

    eng = LLMEngine(num_gpu_blocks=64)
    prompt = {"prompt_token_ids": real_prompts[0]}
    eng.add_request("a", prompt, _params(n=2))  # its fork child would naively be called "a#1"
    eng.add_request("a#1", prompt, _params())
    eng.add_request("q#r#s", prompt, _params(n=2))
    outs = _drain(eng)
    assert sorted(outs) == ["a", "a#1", "q#r#s"]
    assert [len(outs[k]) for k in ("a", "a#1", "q#r#s")] == [2, 1, 2]
    first = outs["a#1"][0]
    assert all(c == first for k in outs for c in outs[k]), "greedy completions of one prompt must agree"
    assert (
        eng.kv_cache_manager.num_free_blocks == 64
        and not eng.output_processor.groups
        and not eng.output_processor.member_group
    )


def test_more_completions_than_max_num_seqs_is_rejected(real_prompts):
    from pagedlab import LLMEngine
    from pagedlab.engine.beam_search import BeamSearchParams, beam_search
    from pagedlab.errors import InvalidRequestError

    eng = LLMEngine(num_gpu_blocks=64, max_num_seqs=2)
    with pytest.raises(InvalidRequestError, match="max_num_seqs=2"):
        eng.add_request("a", {"prompt_token_ids": real_prompts[0]}, _params(n=3))
    with pytest.raises(InvalidRequestError, match="max_num_seqs=2"):
        beam_search(eng, real_prompts[0], BeamSearchParams(beam_width=3, max_tokens=2))
    assert not eng.has_unfinished_requests() and not eng.output_processor.groups
    eng.add_request("b", {"prompt_token_ids": real_prompts[0]}, _params(n=2))  # exactly fits
    assert len(_drain(eng)["b"]) == 2
