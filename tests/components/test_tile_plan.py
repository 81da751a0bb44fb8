"""The kv_tile_load slot in the engine: the learner's tile load runs once per step and tile on a cache
of slot numbers (``plan_tile_loads``), and every layer gathers its K/V by the slots it chose."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.reference import load_kv_tile, paged_decode_attention
from pagedlab.model.attention import DECODE_TILE, plan_tile_loads, tiled_decode_attention

BLOCK_SIZE, NUM_BLOCKS, HKV, HQ, D = 16, 64, 2, 6, 8


def _case(seq_lens: list[int], nan_unused: bool) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    key_cache = torch.randn(NUM_BLOCKS, BLOCK_SIZE, HKV, D, generator=g)
    value_cache = torch.randn(NUM_BLOCKS, BLOCK_SIZE, HKV, D, generator=g)
    width = max(1, max((n + BLOCK_SIZE - 1) // BLOCK_SIZE for n in seq_lens))
    perm = torch.randperm(NUM_BLOCKS, generator=g)[: len(seq_lens) * width].view(len(seq_lens), width)
    block_tables = perm.to(torch.int32)
    if nan_unused:  # every slot no sequence owns (and the tail of each last block) holds NaN
        used = torch.zeros(NUM_BLOCKS * BLOCK_SIZE, dtype=torch.bool)
        for s, n in enumerate(seq_lens):
            for pos in range(n):
                used[int(block_tables[s, pos // BLOCK_SIZE]) * BLOCK_SIZE + pos % BLOCK_SIZE] = True
        for cache in (key_cache, value_cache):
            cache.view(-1, HKV, D)[~used] = float("nan")
    query = torch.randn(len(seq_lens), HQ, D, generator=g)
    return query, key_cache, value_cache, block_tables, torch.tensor(seq_lens, dtype=torch.int32)


@pytest.mark.parametrize("nan_unused", [False, True])
@pytest.mark.parametrize("seq_lens", [[1], [16, 17, 64, 65, 130], [0, 5]])
def test_planned_tiles_equal_the_reference(seq_lens: list[int], nan_unused: bool) -> None:
    query, kc, vc, bt, sl = _case(seq_lens, nan_unused)
    plan = plan_tile_loads(load_kv_tile, PagedKV(kc, vc, bt, sl))
    got = tiled_decode_attention(query, PagedKV(kc, vc, bt, sl), 0.3, plan=plan)
    # the reference reads whole blocks (masked lanes included), so it gets the caches without the NaN
    want = paged_decode_attention(query, PagedKV(kc.nan_to_num(0.0), vc.nan_to_num(0.0), bt, sl), 0.3)
    assert not got.isnan().any()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # the plan: each lane's slot (+1) from the block table, 0 past the sequence; mask = pos < seq_len
    for s, n in enumerate(seq_lens):
        pos = torch.arange(plan.slots.shape[1])
        assert torch.equal(plan.mask[s], pos < n)
        want_slots = [int(bt[s, p // BLOCK_SIZE]) * BLOCK_SIZE + p % BLOCK_SIZE + 1 if p < n else 0 for p in pos]
        assert plan.slots[s].tolist() == want_slots
    assert plan.slots.shape[1] % DECODE_TILE == 0


def test_a_wrong_tile_load_changes_the_output() -> None:
    """The gather really follows the plan: a load that reads the next block gives other attention."""

    def next_block(cache: Any, table: Any, start: int, size: int, seq_len: int) -> Any:
        rows, mask = load_kv_tile(cache, table.roll(1), start, size, seq_len)
        return rows, mask

    query, kc, vc, bt, sl = _case([40, 33], nan_unused=False)
    kv = PagedKV(kc, vc, bt, sl)
    plan = plan_tile_loads(next_block, kv)
    got = tiled_decode_attention(query, kv, 0.3, plan=plan)
    assert not torch.allclose(got, paged_decode_attention(query, kv, 0.3))


def test_the_tile_load_runs_once_per_step_and_tile_not_per_layer() -> None:
    """Per step: one call per tile of each decoding sequence, whatever the number of layers; tokens
    as with the kit's engine."""
    from pagedlab import SamplingParams
    from tests.components.helpers import PROMPTS, run, solution_components
    from tests.robust.helpers import tiny_engine

    calls: list[int] = []

    def counting(cache: Any, table: Any, start: int, size: int, seq_len: int) -> Any:
        calls.append(seq_len)
        return load_kv_tile(cache, table, start, size, seq_len)

    eng = tiny_engine(components=solution_components().plug("kv_tile_load", counting))
    assert eng.model_config.num_hidden_layers > 1
    prompts = PROMPTS[:2]
    for i, p in enumerate(prompts):
        eng.add_request(f"r{i}", {"prompt_token_ids": p}, SamplingParams(temperature=0, max_tokens=5, ignore_eos=True))
    per_step, tokens = [], {}
    while eng.has_unfinished_requests():
        before = len(calls)
        for o in eng.step():
            if o.finished:
                tokens[o.request_id] = list(o.outputs[0].token_ids)
        per_step.append(len(calls) - before)
    assert per_step[0] == 0  # the prefill step decodes nothing
    assert per_step[1:] == [2, 2, 2, 2]  # two sequences, one tile each (< 64 tokens), per step, not per layer
    assert [tokens["r0"], tokens["r1"]] == run(tiny_engine(), prompts, max_tokens=5)
