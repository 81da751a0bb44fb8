"""Lab 02 - the block table: ``02.slot_mapping`` - ``slot_mapping(block_table, positions, block_size)``,
token position -> physical KV slot (vLLM's ``BlockTable.compute_slot_mapping``). The free queue, the lab's
other exercise, is in ``lab02.py``.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.differential import differential
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.viz import render_block_table


# --- 02.slot_mapping ---------------------------------------------------------------------------------
def _slot_hint(expected: Any, got: Any, state: Any) -> str | None:
    if not isinstance(got, list) or not isinstance(state, dict):
        return "return a list with one int per position"
    bt, bs, positions = state["block_table"], state["block_size"], state["positions"]
    for i, (e, g) in enumerate(zip(expected, got)):
        if e == g:
            continue
        pos = positions[i]
        cand = {
            "you swapped // and %: the block index is pos // block_size, the offset pos % block_size": (
                bt[pos % bs] * bs + pos // bs
            )
            if pos % bs < len(bt)
            else None,
            "multiply the block id by block_size: block b starts at slot b * block_size": bt[pos // bs] + pos % bs,
            "that is the logical position; look the physical block up in block_table": pos,
            "add the offset inside the block (pos % block_size)": bt[pos // bs] * bs,
        }
        for text_, v in cand.items():
            if v == g:
                return f"position {pos}: {text_}"
        return f"position {pos}: slot = block_table[{pos} // {bs}] * {bs} + {pos} % {bs}"
    return None


def _slot_render(state: dict[str, Any], expected: Any, path: Any) -> str:

    positions = state["positions"]
    hi = positions[path[0]] if path and isinstance(path[0], int) and path[0] < len(positions) else None
    return render_block_table(
        state["block_table"],
        max(positions) + 1,
        state["block_size"],
        num_gpu_blocks=state.get("num_gpu_blocks"),
        highlight_pos=hi,
    )


SLOT = register(
    Exercise(
        "02.slot_mapping",
        "slot_mapping",
        "token position -> physical KV slot through the block table",
        render=_slot_render,
        components=("slot_mapping", "allocator"),
    )
)


def _slot_case(
    fn: Any, rec: Any, block_table: list[int], positions: list[int], block_size: int, num_gpu_blocks: int
) -> None:
    rec.step(
        f"slot_mapping({block_table}, {positions if len(positions) <= 8 else f'[...{len(positions)} positions]'}, "
        f"block_size={block_size})"
    )
    st = {
        "block_table": list(block_table),
        "positions": list(positions),
        "block_size": block_size,
        "num_gpu_blocks": num_gpu_blocks,
    }
    rec.state(st)
    table, pos = list(block_table), list(positions)
    before = snapshot(contracts.SLOT_MAPPING_MUTATES, block_table=table, positions=pos)
    slots = fn(table, pos, block_size)
    observe_contract(rec, contracts.SLOT_MAPPING, slots)
    rec.observe("slots", slots, hint=_slot_hint)
    observe_read_only(rec, contracts.SLOT_MAPPING_MUTATES, before, block_table=table, positions=pos)


@SLOT.test("the tokens of a single block")
def _(fn: Any, rec: Any) -> None:
    _slot_case(fn, rec, [5], [0, 1, 2, 3], 4, 8)


@SLOT.test("follow the block table, not the logical order")
def _(fn: Any, rec: Any) -> None:
    _slot_case(fn, rec, [7, 2, 9], list(range(12)), 4, 12)


@SLOT.test("a decode step maps only the newest position")
def _(fn: Any, rec: Any) -> None:
    _slot_case(fn, rec, [3, 1, 4], [10], 4, 8)
    _slot_case(fn, rec, [6, 0], [4], 4, 8)


@SLOT.test("random block tables, positions in any order, block sizes 1, 3 and 16")
def _(fn: Any, rec: Any) -> None:
    rng = random.Random(7)
    for bs in (1, 3, 16):
        for _ in range(3):
            nblocks = rng.randint(1, 6)
            table = rng.sample(range(32), nblocks)
            positions = [rng.randrange(nblocks * bs) for _ in range(rng.randint(1, 10))]
            _slot_case(fn, rec, table, positions, bs, 32)


# --- differential test (random cases against the reference, pagedlab.grading.differential) -------------
# 02.slot_mapping: block tables as the pool hands them out after frees (any order, ids up to 4095), block
# sizes 1-32, the positions the model runner passes (one consecutive run: a prefill, a chunk starting
# mid-prompt, a decode) and any positions in any order (the contract), the type the engine takes.
def _slot_map_case() -> Any:
    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        bs = draw(st.sampled_from([16, 1, 2, 3, 4, 8, 32]))
        nblocks = draw(st.integers(1, 12))
        num_gpu_blocks = draw(st.sampled_from([nblocks, 16, 64, 512, 4096]))
        num_gpu_blocks = max(num_gpu_blocks, nblocks)
        table = draw(st.lists(st.integers(0, num_gpu_blocks - 1), min_size=nblocks, max_size=nblocks, unique=True))
        cap = nblocks * bs
        if draw(st.booleans()):  # the model runner: one run of consecutive positions ending in the last block
            end = draw(st.integers((nblocks - 1) * bs + 1, cap))
            start = draw(st.one_of(st.just(end - 1), st.integers(0, end - 1)))
            positions = list(range(start, end))
        else:
            one_anywhere = st.integers(0, cap - 1).map(lambda pos: [pos])  # a single position in any block
            positions = draw(st.one_of(one_anywhere, st.lists(st.integers(0, cap - 1), min_size=1, max_size=12)))
        return {"block_table": table, "positions": positions, "block_size": bs, "num_gpu_blocks": num_gpu_blocks}

    return case()


@differential(
    SLOT,
    _slot_map_case(),
    examples=60,
    draws="block tables of 1-12 distinct ids in any order (pools of up to 4096 blocks), block sizes 1-32, positions "
    "one consecutive run ending in the last block (prefill, chunk, decode) or 1-12 anywhere in any order",
)
def _(fn: Any, case: dict[str, Any], rec: Any) -> None:
    table, positions, bs = case["block_table"], case["positions"], case["block_size"]
    shown = positions if len(positions) <= 8 else f"[{positions[0]}...{positions[-1]}: {len(positions)} positions]"
    rec.step(f"slot_mapping({table}, {shown}, block_size={bs})")
    rec.state(dict(case))
    t, p = list(table), list(positions)
    before = snapshot(contracts.SLOT_MAPPING_MUTATES, block_table=t, positions=p)
    slots = fn(t, p, bs)
    observe_contract(rec, contracts.SLOT_MAPPING, slots)
    rec.observe("slots", slots, hint=_slot_hint)
    observe_read_only(rec, contracts.SLOT_MAPPING_MUTATES, before, block_table=t, positions=p)
