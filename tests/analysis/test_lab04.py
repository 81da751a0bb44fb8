"""analysis.lab04.static_step: request-level batching, the lab 04 baseline (no grader involved)."""

from __future__ import annotations

from collections import deque

from pagedlab.analysis.lab04 import static_step, toy_serve
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request


def _req(rid: str, n: int) -> Request:
    return Request(rid, list(range(1, n + 1)))


def test_static_step_forms_a_batch_only_when_none_runs() -> None:
    kv = KVCacheManager(4, 8, 64)
    running: list[Request] = []
    waiting = deque([_req("a", 5), _req("b", 3), _req("c", 2), _req("d", 1)])
    # empty batch: admit FCFS up to max_num_seqs=3, all missing tokens scheduled
    assert static_step(running, waiting, kv, 3) == {"a": 5, "b": 3, "c": 2}
    assert [r.request_id for r in running] == ["a", "b", "c"] and [r.request_id for r in waiting] == ["d"]
    assert kv.get_block_ids("a") and kv.num_free_blocks == 8 - 2 - 1 - 1
    for r in running:
        r.num_computed_tokens = r.num_tokens
        r.append_output_token_ids(7)
    running.pop()  # c finished; the batch still runs, so d waits although there is room
    assert static_step(running, waiting, kv, 3) == {"a": 1, "b": 1}
    assert [r.request_id for r in waiting] == ["d"] and len(running) == 2


def test_static_step_stops_at_the_head_that_does_not_fit() -> None:
    kv = KVCacheManager(4, 3, 64)
    running: list[Request] = []
    waiting = deque([_req("a", 8), _req("big", 9), _req("small", 1)])
    assert static_step(running, waiting, kv, 8) == {"a": 8}  # big needs 3 blocks, 1 left; small may not overtake
    assert [r.request_id for r in waiting] == ["big", "small"] and kv.num_free_blocks == 1


def test_static_batches_finish_together_before_the_next_starts() -> None:
    steps = toy_serve(
        lambda run, wait, kv: static_step(run, wait, kv, 2),
        [(0, "a", 3, 1), (0, "b", 3, 4), (0, "c", 3, 1)],
        num_gpu_blocks=16,
    )
    started = {
        rid: k
        for k, s in enumerate(steps)
        for rid, _, _ in s["scheduled"][:]
        if rid not in {r for t in steps[:k] for r, _, _ in t["scheduled"]}
    }
    finished = {rid: k for k, s in enumerate(steps) for rid in s["finished"]}
    assert started["a"] == started["b"] == 0 and finished["a"] == 0 and finished["b"] == 3
    assert started["c"] == 4  # c waits for the whole first batch (b) although a left at step 0
