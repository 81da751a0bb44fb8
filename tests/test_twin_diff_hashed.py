"""The twin's pool comparison and the free-queue order the kit keeps (docs/vllm_differences.md).

vLLM 0.32.0 puts a freed block without a hash at the free queue's front (``v1/core/block_pool.py:793-801``);
the kit keeps vLLM 0.11's tail. From the first step whose block ids differ, the kit can evict a cached block
where vLLM reuses the unhashed one, so the number of blocks still carrying a hash may differ while every
decision agrees (seen: ``prefix_eviction`` and 9 of the 200 fuzz workloads). ``diff`` therefore counts hashed
blocks only before that step; before it, a different count is a divergence. No vLLM needed: hand-made traces.
"""

from __future__ import annotations

from pagedlab.twin import Trace, diff
from pagedlab.twin.records import StepRecord


def _step(n: int, table: list[int], free: list[int], hashed: list[int]) -> StepRecord:
    return StepRecord(
        n,
        [["a", 1]],
        block_ids={"a": table},
        num_free_blocks=len(free),
        free_queue=free,
        hashed_blocks=hashed,
        hit_block_ids={},
    )


def _trace(engine: str, steps: list[StepRecord]) -> Trace:
    return Trace(engine, "w", steps, {"a": [[1]]}, {"a": ["length"]}, num_free_blocks=4)


def test_a_different_number_of_hashed_blocks_diverges_while_the_ids_agree() -> None:
    kit = _trace("kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0])])
    vllm = _trace("vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0, 1])])
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.field) == (1, "number of hashed blocks")
    assert (found.left, found.right) == (1, 2)


def test_after_the_first_id_difference_the_hashed_count_is_not_compared() -> None:
    # step 1: the free queues' order differs (the kit's tail vs vLLM's front); step 2: one fewer cached block
    kit = _trace(
        "kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [2, 3, 1], [0, 1]), _step(2, [0], [2, 3, 1], [0])]
    )
    vllm = _trace(
        "vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0, 1]), _step(2, [0], [1, 2, 3], [0, 1])]
    )
    assert diff(kit, vllm) is None


def test_after_the_first_id_difference_the_decisions_and_free_counts_still_are() -> None:
    kit = _trace("kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [2, 3, 1], [0]), _step(2, [0, 1], [2, 3], [0])])
    vllm = _trace("vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0]), _step(2, [0], [1, 2, 3], [0])])
    found = diff(kit, vllm)
    assert found is not None and found.step == 2 and found.field in ("num_free_blocks", "block_ids (count)")
