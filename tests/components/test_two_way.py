"""Two-way: every wrong learner part is caught by its exercise's check() or, once plugged into the
real engine, by the engine's guard naming the component. Some slip past check() (its toy inputs are
small) and only the engine notices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from pagedlab.engine.components import Components
from pagedlab.errors import ComponentError
from pagedlab.grading.checking import check
from tests.components.helpers import run, slot_mapping_past_last_block, step_without_running_allocation
from tests.robust.helpers import tiny_engine

LONG = [list(range(3, 3 + 80))]  # an 80-token prompt: one prefill chunk of 80 positions


def slot_mapping_64(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
    """A fixed buffer of 64 slots: right for every chunk the hand-written tests use (the differential test's
    consecutive runs reach 384 positions, so check() catches it now too)."""
    out = [0] * 64
    for i, pos in enumerate(positions[:64]):
        out[i] = block_table[pos // block_size] * block_size + pos % block_size
    return out[: len(positions)]


def tile_load_int_mask(
    cache: torch.Tensor, block_table: torch.Tensor, tile_start: int, tile_size: int, seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns the mask as 0/1 integers."""
    block_size = cache.shape[1]
    pos = tile_start + torch.arange(tile_size)
    mask = (pos < seq_len).long()
    logical = torch.where(mask.bool(), pos // block_size, torch.zeros_like(pos))
    return cache[block_table[logical], pos % block_size] * mask[:, None, None], mask


def schedule_with_budget(*args: Any) -> dict[str, int]:
    return step_without_running_allocation(*args)


#: (exercise id, slot, wrong part, caught by check(), what the guard says, engine prompts)
CASES: list[tuple[str, str, Callable[..., Any], bool, str, list[list[int]] | None]] = [
    ("02.slot_mapping", "slot_mapping", slot_mapping_64, True, "64 slots for 80 positions", LONG),
    ("02.slot_mapping", "slot_mapping", slot_mapping_past_last_block, True, "outside the request's blocks", None),
    ("05.schedule_with_budget", "schedule_step", schedule_with_budget, True, "was allocate_slots called", None),
    ("08.load_kv_tile", "kv_tile_load", tile_load_int_mask, True, "not torch.bool", None),
]


@pytest.mark.parametrize(
    "eid,slot,wrong,by_check,guard_says,prompts", CASES, ids=[f"{c[0]}-{c[2].__name__}" for c in CASES]
)
def test_wrong_part_is_caught(eid, slot, wrong, by_check, guard_says, prompts):
    assert check(wrong, eid, show=False).passed is not by_check
    eng = tiny_engine(components=Components.kit().plug(slot, wrong), max_num_batched_tokens=128)
    with pytest.raises(ComponentError) as info:
        run(eng, prompts) if prompts else run(eng)
    assert info.value.component == slot and guard_says in str(info.value), str(info.value)
