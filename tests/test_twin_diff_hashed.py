"""The twin's pool comparison: every block id, the free queue and the hashed blocks at every step.

The kit frees blocks as vLLM 0.32.0 (``BlockPool.free_blocks``, ``v1/core/block_pool.py:774-805``: no hash to
the free queue's front, hashed to its tail), so ``diff`` compares the ids themselves, not only up to a renaming,
and the hashed blocks at every step. (While the kit kept vLLM 0.11's tail for every block, it compared the
number of hashed blocks only before the first id difference: ``prefix_eviction`` kept 6 on the kit, 7 on vLLM.)
No vLLM needed: hand-made traces.
"""

from __future__ import annotations

from pagedlab.twin import Trace, diff
from pagedlab.twin.records import StepRecord, first_block_id_difference


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


def test_the_same_ids_at_every_step_agree() -> None:
    steps = [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [3, 2, 1], [0, 1])]
    assert diff(_trace("kit", steps), _trace("vllm", steps)) is None


def test_a_different_number_of_hashed_blocks_diverges_while_the_ids_agree() -> None:
    kit = _trace("kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0])])
    vllm = _trace("vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0, 1])])
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.field) == (1, "hashed_blocks")
    assert (found.left, found.right) == ([0], [0, 1])


def test_a_reordered_free_queue_is_a_divergence_and_the_hashed_blocks_stay_compared_after_it() -> None:
    # step 1: the free queues' order differs (vLLM 0.11's tail vs 0.32's front); the old twin let it pass
    kit = _trace("kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [2, 3, 1], [0, 1])])
    vllm = _trace("vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0, 1])])
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.field) == (1, "free_queue")
    assert (found.left, found.right) == ([2, 3, 1], [1, 2, 3])
    # the same queue, but one fewer cached block two steps after a block-table id difference
    kit = _trace("kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [2], [0, 1, 3], [2]), _step(2, [2], [0, 1, 3], [2])])
    vllm = _trace(
        "vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [2], [0, 1, 3], [2]), _step(2, [2], [0, 1, 3], [0, 2])]
    )
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.field) == (2, "hashed_blocks")


def test_a_block_table_renamed_is_named_by_field_and_request() -> None:
    kit = _trace("kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0, 1], [2, 3], [0])])
    vllm = _trace("vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0, 3], [1, 2], [0])])
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.request_id, found.field) == (1, "a", "block_ids")
    assert (found.left, found.right) == ([0, 1], [0, 3])
    ids = first_block_id_difference(kit, vllm)
    assert ids is not None and (ids.step, ids.field, ids.left_engine, ids.right_engine) == (
        1,
        "block_ids",
        "kit",
        "vllm",
    )


def test_decisions_are_compared_before_ids() -> None:
    kit = _trace("kit", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0, 1], [2, 3], [0])])
    vllm = _trace("vllm", [_step(0, [0], [1, 2, 3], [0]), _step(1, [0], [1, 2, 3], [0])])
    found = diff(kit, vllm)
    assert found is not None and found.step == 1 and found.field == "num_free_blocks"
