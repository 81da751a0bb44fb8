"""``build_parts``: the engine's constructor keywords and hooks for a ``Components`` choice, every
learner part wrapped in its guard and every kit part the plain kit code (so a kit-only engine runs
exactly the code it runs without components)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pagedlab.core.block_pool import BlockPool
from pagedlab.parts.guard import Guard
from pagedlab.parts.kernel import GuardedTritonTileLoad, guarded_kv_tile_load
from pagedlab.parts.memory import GuardedForkCow, free_queue_factory, guarded_prefix_lookup, guarded_slot_mapping
from pagedlab.parts.protocols import KVTileLoadFn, SlotMappingFn
from pagedlab.parts.radix import GuardedRadixTree
from pagedlab.parts.schedule import (
    LearnerPreemptingScheduler,
    LearnerStepScheduler,
    PreemptingStep,
    guarded_pick_victim,
    guarded_preempt_retry,
)
from pagedlab.parts.slots import Components
from pagedlab.sched.scheduler import PickVictim, PreemptRetry, Scheduler, pick_victim, preempt_and_retry
from pagedlab.trace import Tracer

__all__ = ["EngineParts", "build_parts"]


@dataclass
class EngineParts:
    """What :func:`build_parts` hands the engine.

    Attributes:
        kv_kwargs: keywords of ``KVCacheManager`` (its factories); empty for kit parts.
        scheduler_cls, scheduler_kwargs: the scheduler to build and its extra keywords.
        pick_victim_fn, preempt_retry_fn: the scheduler's victim choice and preempt-and-retry loop.
        slot_mapping_fn, kv_tile_load: the model runner's hooks (None: its own vectorised code).
        decode_override: decode attention that replaces the backend's (lab 08's Triton tile load
            inside the kernel; only on the ``"triton"`` backend, the engine decides).
    """

    kv_kwargs: dict[str, Any] = field(default_factory=dict)
    scheduler_cls: type[Scheduler] = Scheduler
    scheduler_kwargs: dict[str, Any] = field(default_factory=dict)
    pick_victim_fn: PickVictim = pick_victim
    preempt_retry_fn: PreemptRetry = preempt_and_retry
    slot_mapping_fn: SlotMappingFn | None = None
    kv_tile_load: KVTileLoadFn | None = None
    decode_override: GuardedTritonTileLoad | None = None


def build_parts(comps: Components, step: Callable[[], int], scheduler_cls: type[Scheduler]) -> EngineParts:
    """The engine's hooks for ``comps`` (``step()`` gives the current engine step, for the guards)."""
    parts = EngineParts(scheduler_cls=scheduler_cls)
    for slot in comps.parts:
        if comps.is_yours(slot):
            _PLUG[slot](parts, comps.parts[slot].impl, comps.guard(slot, step))
    return parts


def _free_queue(p: EngineParts, impl: Any, g: Guard) -> None:
    p.kv_kwargs["free_queue_factory"] = free_queue_factory(impl, g)


def _prefix_lookup(p: EngineParts, impl: Any, g: Guard) -> None:
    p.kv_kwargs["prefix_lookup"] = guarded_prefix_lookup(impl, g)


def _radix(p: EngineParts, impl: Any, g: Guard) -> None:
    p.kv_kwargs["radix_tree_factory"] = lambda page_size: GuardedRadixTree(impl, page_size, g)


def _fork_cow(p: EngineParts, impl: Any, g: Guard) -> None:
    def cow(pool: BlockPool, block_size: int, tracer: Tracer | None) -> GuardedForkCow:
        return GuardedForkCow(impl, pool, block_size, g, tracer)

    p.kv_kwargs["cow_factory"] = cow


def _schedule_step(p: EngineParts, impl: Any, g: Guard) -> None:
    p.scheduler_cls = LearnerPreemptingScheduler if isinstance(impl, PreemptingStep) else LearnerStepScheduler
    p.scheduler_kwargs = {"step_fn": impl, "guard": g}


def _pick_victim(p: EngineParts, impl: Any, g: Guard) -> None:
    p.pick_victim_fn = guarded_pick_victim(impl, g)


def _preempt_retry(p: EngineParts, impl: Any, g: Guard) -> None:
    p.preempt_retry_fn = guarded_preempt_retry(impl, g)


def _slot_mapping(p: EngineParts, impl: Any, g: Guard) -> None:
    p.slot_mapping_fn = guarded_slot_mapping(impl, g)


def _kv_tile_load(p: EngineParts, impl: Any, g: Guard) -> None:
    p.kv_tile_load = guarded_kv_tile_load(impl, g)


def _triton_tile_load(p: EngineParts, impl: Any, g: Guard) -> None:
    p.decode_override = GuardedTritonTileLoad(impl, g)


#: How a learner's part in each slot reaches the engine (every slot of ``SLOTS`` has one).
_PLUG: dict[str, Callable[[EngineParts, Any, Guard], None]] = {
    "free_queue": _free_queue,
    "slot_mapping": _slot_mapping,
    "fork_cow": _fork_cow,
    "schedule_step": _schedule_step,
    "pick_victim": _pick_victim,
    "preempt_retry": _preempt_retry,
    "prefix_lookup": _prefix_lookup,
    "radix": _radix,
    "kv_tile_load": _kv_tile_load,
    "triton_tile_load": _triton_tile_load,
}
