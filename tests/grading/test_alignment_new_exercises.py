"""The references of exercises 06.schedule_with_preemption, 07.get_computed_blocks and
08.triton_load_kv_tile agree with the library code they teach (Scheduler, KVCacheManager, the
PyTorch reference attention)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pagedlab.grading import registry


def ref(eid: str) -> Any:
    return registry.get(eid).get_reference()


@pytest.mark.parametrize("block_size,seed", [(1, 0), (4, 1), (16, 2)])
def test_get_computed_blocks_matches_the_kv_cache_manager(block_size: int, seed: int) -> None:
    from pagedlab.core.kv_cache_manager import KVCacheManager
    from pagedlab.course.exercises.lab07_lookup import tokens
    from pagedlab.request import Request

    fn = ref("07.get_computed_blocks")
    kv = KVCacheManager(block_size, 64, 4096, enable_caching=True, hash_seed=7)
    rng = random.Random(seed)
    hits = 0
    for i in range(30):
        req = Request(
            f"r{i}", tokens(rng.randint(1, 3), rng.randint(1, 3 * block_size + 2)), block_hasher=kv.block_hasher
        )
        before = kv.block_pool.snapshot()
        mine_blocks, mine_tokens = fn(req, kv.block_pool, block_size)
        assert kv.block_pool.snapshot() == before
        lib_blocks, lib_tokens = kv.get_computed_blocks(req)
        assert [b.block_id for b in mine_blocks] == [b.block_id for b in lib_blocks]
        assert mine_tokens == lib_tokens < req.num_tokens
        hits += len(lib_blocks)
        if kv.allocate_slots(req, req.num_tokens - lib_tokens, lib_tokens, lib_blocks) is not None:
            req.num_computed_tokens = req.num_tokens
            if rng.random() < 0.8:
                kv.free(req)
    assert hits > 5, "the workload must produce prefix hits"


def _library_preemption(
    arrivals, blocks: int, cpu: int, policy: str, mode: str, priorities: dict[str, int]
) -> list[tuple[dict[str, int], list[str]]]:
    from pagedlab.config import CacheConfig, SchedulerConfig
    from pagedlab.core.kv_cache_manager import KVCacheManager
    from pagedlab.request import Request
    from pagedlab.sampling_params import SamplingParams
    from pagedlab.sched.scheduler import Scheduler

    sched = Scheduler(
        SchedulerConfig(
            max_num_seqs=8,
            max_num_batched_tokens=10**6,
            max_model_len=4096,
            long_prefill_token_threshold=0,
            policy=policy,
            preemption_mode=mode,
        ),
        CacheConfig(block_size=4, num_gpu_blocks=blocks, num_cpu_blocks=cpu),
        KVCacheManager(4, blocks, 4096, num_cpu_blocks=cpu),
    )
    pending, out, step = sorted(arrivals), [], 0
    while pending or sched.has_unfinished_requests():
        while pending and pending[0][0] <= step:
            _, rid, plen, mt = pending.pop(0)
            sched.add_request(
                Request(
                    rid,
                    [(7 * i + len(rid)) % 97 for i in range(plen)],
                    SamplingParams(max_tokens=mt, ignore_eos=True),
                    arrival_time=float(step),
                    priority=priorities.get(rid, 0),
                )
            )
        so = sched.schedule()
        out.append((dict(so.num_scheduled_tokens), list(so.preempted)))
        sched.update_from_output(
            so, {s.request.request_id: 1 + s.request.num_output_tokens % 50 for s in so.scheduled if s.samples}
        )
        step += 1
    return out


def _exercise_preemption(
    arrivals, blocks: int, cpu: int, policy: str, mode: str, priorities: dict[str, int]
) -> list[tuple[dict[str, int], list[str]]]:
    from pagedlab.course.exercises.lab06_preempt import PreemptSim

    fn = ref("06.schedule_with_preemption")
    sim = PreemptSim(arrivals, blocks, 4, cpu, priorities)
    out = []
    while not sim.done():
        sim.arrive()
        scheduled, preempted = fn(sim.running, sim.waiting, sim.swapped, sim.kv, 8, policy, mode)
        out.append((dict(scheduled), list(preempted)))
        sim.apply(scheduled)
    return out


def _preemption_cases() -> list[Any]:
    from pagedlab.course.exercises.lab06_preempt import THREE, random_arrivals

    prio = {f"r{i}": (i * 5) % 3 for i in range(8)}
    return [
        pytest.param([(0, "r0", 4, 8), (0, "r1", 5, 8), (0, "r2", 6, 8)], 5, 0, "fcfs", "recompute", {}, id="fcfs"),
        pytest.param(random_arrivals(3, 8), 9, 0, "fcfs", "recompute", {}, id="fcfs-random"),
        pytest.param(random_arrivals(7, 10), 10, 0, "fcfs", "recompute", {}, id="fcfs-random-2"),
        pytest.param(THREE, 8, 0, "priority", "recompute", {"r0": 2, "r1": 0, "r2": 1}, id="priority"),
        pytest.param(THREE + [(2, "r3", 2, 3), (4, "r4", 2, 3)], 8, 16, "fcfs", "swap", {}, id="swap"),
        pytest.param(THREE, 8, 1, "fcfs", "swap", {}, id="swap-cpu-full"),
        pytest.param(random_arrivals(5, 8), 9, 6, "priority", "swap", prio, id="priority-swap-random"),
    ]


@pytest.mark.parametrize("arrivals,blocks,cpu,policy,mode,priorities", _preemption_cases())
def test_schedule_with_preemption_matches_the_scheduler(arrivals, blocks, cpu, policy, mode, priorities) -> None:
    got = _exercise_preemption(arrivals, blocks, cpu, policy, mode, priorities)
    assert got == _library_preemption(arrivals, blocks, cpu, policy, mode, priorities)
    assert any(pre for _, pre in got), "the workload must preempt"


@pytest.mark.parametrize("block_size,seq_lens", [(1, [3, 1]), (2, [5, 8]), (4, [9, 2, 4])])
def test_triton_load_kv_tile_reads_what_gather_kv_reads(block_size: int, seq_lens: list[int]) -> None:
    """Every lane of every tile equals gather_kv's row for that position (0.0 past seq_len), and the
    kit's decode kernel with the tile load agrees with the kernel's own loads."""
    torch = pytest.importorskip("torch")
    from pagedlab.course.exercises.lab08_triton import (
        decode_with_tile_loader,
        probe_tile,
        stale_cache,
    )
    from pagedlab.kernels.decode_attention import (
        paged_decode_attention as triton_decode,
    )
    from pagedlab.kernels.paged_kv import PagedKV
    from pagedlab.kernels.reference import gather_kv
    from pagedlab.kernels.runtime import kernels_can_run

    if not kernels_can_run("cpu"):
        pytest.skip("needs TRITON_INTERPRET=1 set before triton is imported")
    fn = ref("08.triton_load_kv_tile")
    rng = random.Random(block_size)
    nblocks = [-(-n // block_size) for n in seq_lens]
    ids = rng.sample(range(1, 16), sum(nblocks))
    tables = [ids[sum(nblocks[:i]) : sum(nblocks[: i + 1])] for i in range(len(seq_lens))]
    k = stale_cache(16, block_size, tables, seq_lens)
    for table, n in zip(tables, seq_lens):
        whole = gather_kv(k, torch.tensor(table), n)
        for start in range(0, n + 4, 4):
            for head in (0, 1):
                tile, mask = probe_tile(fn, k, table, start, n, head, 4)
                for i in range(4):
                    pos = start + i
                    assert bool(mask[i]) == (pos < n)
                    assert torch.equal(tile[i], whole[pos, head] if pos < n else torch.zeros(4))
    width = max(nblocks)
    bt = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    gen = torch.Generator().manual_seed(0)
    k, v = torch.randn(16, block_size, 2, 16, generator=gen), torch.randn(16, block_size, 2, 16, generator=gen)
    q = torch.randn(len(seq_lens), 6, 16, generator=gen)
    kv = PagedKV(k, v, bt.to(torch.int32), torch.tensor(seq_lens, dtype=torch.int32))
    mine = decode_with_tile_loader(fn, q, kv, 0.5)
    lib = triton_decode(q, kv, 0.5, block_n=16)  # the kernel's own loads
    assert torch.allclose(mine, lib, atol=1e-5), float((mine - lib).abs().max())


def test_triton_reference_runs_in_a_process_started_without_triton_interpret() -> None:
    """The grader's trusted process is not started with TRITON_INTERPRET=1: loading the Triton exercise's
    reference switches the interpreter on (no GPU, triton not imported yet), so the reference passes."""
    import os
    import subprocess
    import sys

    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("with a GPU the helper is compiled, not interpreted")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = (
        "from pagedlab.grading import registry\nfrom pagedlab.grading.checking import check\n"
        "ex = registry.get('08.triton_load_kv_tile')\nres = check(ex.get_reference(), ex.id, show=False)\n"
        "assert res.passed, res.text()\nprint('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr
