"""Tracer and snapshot rebuilding."""

import json

import pytest

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request
from pagedlab.trace import Tracer, rebuild_snapshots


def _run(tracer):
    m = KVCacheManager(4, 9, 64, enable_caching=True, num_cpu_blocks=4, hash_seed=0, tracer=tracer)
    a = Request("a", list(range(10)), block_hasher=m.block_hasher)
    m.allocate_slots(a, 10)
    a.num_computed_tokens = 10
    tracer.next_step()
    b = Request("b", list(range(10)), block_hasher=m.block_hasher)
    m.fork(a, b)
    b.append_output_token_ids(1)
    m.allocate_slots(b, 1)
    b.num_computed_tokens += 1
    tracer.next_step()
    m.swap_out([a])
    m.free(b)
    tracer.next_step()
    m.swap_in([a])
    c = Request("c", list(range(9)), block_hasher=m.block_hasher)
    hits, n = m.get_computed_blocks(c)
    m.allocate_slots(c, 9 - n, n, hits)
    m.record_prefix_cache_stats(c, hits)
    d = Request("d", list(range(100, 100 + 4 * m.num_free_blocks)), block_hasher=m.block_hasher)
    m.allocate_slots(d, d.num_tokens)
    m.free(c)
    m.free(a)
    e = Request("e", list(range(200, 200 + 4 * m.num_free_blocks)), block_hasher=m.block_hasher)
    m.allocate_slots(e, e.num_tokens)  # takes every free block: cached ones are evicted
    return m


def test_every_kind_is_recorded_as_json_with_step():
    t = Tracer()
    _run(t)
    kinds = {e["kind"] for e in t.events}
    assert {
        "init",
        "alloc",
        "free",
        "touch",
        "cache",
        "evict",
        "fork",
        "cow_copy",
        "swap_out",
        "swap_in",
        "cache_hit",
    } <= kinds
    assert json.loads(json.dumps(t.events)) == t.events
    assert [e["step"] for e in t.events] == sorted(e["step"] for e in t.events)


def test_rebuilt_snapshots_match_live_state():
    t = Tracer()
    m = _run(t)
    snaps = rebuild_snapshots(t.events)
    assert [s["step"] for s in snaps] == [0, 1, 2, 3]
    live = m.snapshot()
    for key in ("free_queue", "blocks", "cpu_blocks", "num_free_blocks"):
        assert snaps[-1][key] == live[key]
    fine = rebuild_snapshots(t.events, per="event")
    assert len(fine) == len(t.events) and fine[-1]["blocks"] == live["blocks"]
    fork_snap = next(s for s in fine if s["event"]["kind"] == "fork")
    assert fork_snap["blocks"][0]["owners"] == ["a", "b"] and fork_snap["blocks"][0]["ref_cnt"] == 2


def test_disabled_tracer_records_nothing_and_errors_are_clear():
    t = Tracer(enabled=False)
    _run(t)
    assert t.events == []
    with pytest.raises(ValueError):
        rebuild_snapshots([{"step": 0, "kind": "alloc", "block_ids": [0]}])
    with pytest.raises(ValueError):
        rebuild_snapshots([], num_gpu_blocks=2, per="frame")
