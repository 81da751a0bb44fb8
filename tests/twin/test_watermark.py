"""vLLM 0.32's ``watermark`` (``SchedulerConfig.watermark``) against real vLLM: the same pressure workload
with and without a watermark schedules identically on both engines, and the watermark changes the schedule
(a waiting request is held back while others run, so fewer preemptions). One vLLM run for the whole file."""

from __future__ import annotations

import random

import pytest

from pagedlab.twin import EngineSettings, Trace, TwinRequest, Workload, compare, diff

WATERMARKS = (0.0, 0.25)  # 0.25: int(0.25 * 12) = 3 blocks, vLLM counting its null block (11 usable: 2)


def pressure(watermark: float) -> Workload:
    """8 requests of 1-2 blocks (32 tokens) growing by 48 tokens into 11 usable blocks (vLLM's 12)."""
    rng = random.Random(7)
    reqs = [
        TwinRequest(
            f"w{i}",
            [rng.randrange(100, 49152) for _ in range(rng.randrange(20, 60))],
            {"temperature": 0.0, "max_tokens": 48, "ignore_eos": True},
            arrival_step=i // 2,
        )
        for i in range(8)
    ]
    settings = EngineSettings(num_gpu_blocks=12, max_num_batched_tokens=128, watermark=watermark)
    return Workload(f"pressure_watermark_{watermark}", settings, reqs)


def preemptions(t: Trace) -> int:
    return sum(len(s.preempted) for s in t.steps)


def admission_steps(t: Trace) -> dict[str, int]:
    first: dict[str, int] = {}
    for s in t.steps:
        for rid, _ in s.scheduled:
            first.setdefault(rid, s.step)
    return first


@pytest.fixture(scope="module")
def traces() -> dict[float, tuple[Trace, Trace]]:
    batch = [pressure(w) for w in WATERMARKS]
    return {w: (k, v) for w, (k, v, _) in zip(WATERMARKS, compare(batch))}


@pytest.mark.parametrize("watermark", WATERMARKS)
def test_same_schedule_and_tokens_as_vllm(traces: dict[float, tuple[Trace, Trace]], watermark: float) -> None:
    kit, vllm = traces[watermark]
    assert vllm.steps, "vLLM ran no step"
    found = diff(kit, vllm)
    assert found is None, f"watermark={watermark}: first divergence at {found}"


def test_the_watermark_changes_vllms_schedule(traces: dict[float, tuple[Trace, Trace]]) -> None:
    """Read vLLM's traces: the workload must exercise the watermark, else the twin proves nothing."""
    off, on = traces[0.0][1], traces[0.25][1]
    assert preemptions(off) > 0, "the workload no longer preempts without a watermark"
    assert preemptions(on) < preemptions(off)
    later = [r for r, s in admission_steps(on).items() if s > admission_steps(off)[r]]
    assert later, "no request was admitted later with the watermark"
