"""Shared helpers of the component tests: the solutions' parts, wrong parts, a tiny engine run."""

from __future__ import annotations

from collections import deque
from typing import Any

from pagedlab import LLMEngine, SamplingParams
from pagedlab.engine.components import Components
from pagedlab.grading import registry
from tests.robust.helpers import tiny_engine

#: Prompts of the tiny model (vocabulary 97): long enough for several blocks of 4 and chunking.
PROMPTS = [
    [5, 6, 7, 8, 9, 10, 11, 12, 13],
    [5, 6, 7, 8, 20, 21],
    [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41],
    [5, 6, 7, 8, 9, 10, 11, 12, 50],
]

#: exercise id -> slot, for the exercises whose solution plugs in as is.
SOLUTION_SLOTS = {
    "02.free_queue": "free_queue",
    "02.slot_mapping": "slot_mapping",
    "05.schedule_with_budget": "schedule_step",
    "06.pick_victim": "pick_victim",
    "08.load_kv_tile": "kv_tile_load",
}


def solution(exercise_id: str) -> Any:
    """The canonical solution object of an exercise (a fresh one each call)."""
    return registry.snippet_object(exercise_id)


def solution_components(**overrides: Any) -> Components:
    """Every plugged slot filled with the solutions' parts; ``overrides`` replace slots by name."""
    comps = Components.kit()
    for eid, slot in SOLUTION_SLOTS.items():
        comps = comps.plug(slot, overrides.pop(slot, None) or solution(eid))
    for slot, impl in overrides.items():
        comps = comps.plug(slot, impl)
    return comps


def run(engine: LLMEngine, prompts: list[list[int]] = PROMPTS, max_tokens: int = 6) -> list[list[int]]:
    """Greedy token ids of every prompt, submitted together, stepped to completion."""
    for i, p in enumerate(prompts):
        engine.add_request(
            f"r{i}", {"prompt_token_ids": p}, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
        )
    done: dict[str, list[int]] = {}
    while engine.has_unfinished_requests():
        for o in engine.step():
            if o.finished:
                done[o.request_id] = list(o.outputs[0].token_ids)
    return [done[f"r{i}"] for i in range(len(prompts))]


def kit_tokens(**kw: Any) -> list[list[int]]:
    return run(tiny_engine(**kw))


# --- wrong parts ---------------------------------------------------------------------------------
def step_without_running_allocation(
    running: list[Any],
    waiting: deque[Any],
    kv_cache_manager: Any,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    long_prefill_token_threshold: int,
) -> dict[str, int]:
    """Lab 05's step that forgets ``allocate_slots`` for running requests (issue 10's example)."""
    scheduled: dict[str, int] = {}
    budget = max_num_batched_tokens
    for req in running:
        n = min(req.num_tokens - req.num_computed_tokens, budget)
        if n > 0:
            scheduled[req.request_id] = n
            budget -= n
    while waiting and budget > 0 and len(running) < max_num_seqs:
        req = waiting[0]
        n = min(req.num_tokens - req.num_computed_tokens, budget)
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        running.append(waiting.popleft())
        scheduled[req.request_id] = n
        budget -= n
    return scheduled


def slot_mapping_past_last_block(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
    """Writes the last position's token into the block after the request's highest block id."""
    slots = [block_table[p // block_size] * block_size + p % block_size for p in positions]
    slots[-1] = (max(block_table) + 1) * block_size
    return slots


def tile_load_unmasked(cache: Any, block_table: Any, tile_start: int, tile_size: int, seq_len: int) -> Any:
    """Masks lanes past the sequence but still returns their (stale) rows."""
    import torch

    block_size = cache.shape[1]
    pos = tile_start + torch.arange(tile_size)
    mask = pos < seq_len
    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))
    return cache[block_table[logical], pos % block_size], mask
