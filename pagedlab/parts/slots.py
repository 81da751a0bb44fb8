"""The registry of slots (``SLOTS``) and the choice of one implementation per slot (``Components``).

    from pagedlab.parts.slots import Components
    comps = Components.kit().plug("slot_mapping", my_slot_mapping)
    llm = LLM(components=comps)            # the engine now computes slots with my_slot_mapping

=================  ============================================  =========================================
slot               interface (``pagedlab.parts.protocols``)       where the engine calls it
=================  ============================================  =========================================
``free_queue``     :class:`FreeQueue` (class, built from blocks)  ``BlockPool.free_block_queue``
``slot_mapping``   :class:`SlotMappingFn`                         ``ModelRunner.forward`` (per request)
``schedule_step``  :class:`ScheduleStepFn`                        ``parts.schedule.LearnerStepScheduler``
                   or ``PreemptingStep`` (lab 06)                 or ``LearnerPreemptingScheduler``
``pick_victim``    :class:`PickVictimFn`                          ``Scheduler.pick_victim_fn``
``preempt_retry``  :class:`PreemptRetryFn`                        ``Scheduler.preempt_retry_fn``
``prefix_lookup``  :class:`PrefixLookupFn`                        ``KVCacheManager.get_computed_blocks``
``kv_tile_load``   :class:`KVTileLoadFn`                          ``tiled_decode_attention`` (decode)
``triton_tile_load`` lab 08's ``@triton.jit`` tile load            ``AttentionMetadata.decode_override``
``fork_cow``       ``parts.memory.ForkCowFns``                    ``KVCacheManager.cow`` (fork, one-token
                                                                  append: ``GuardedForkCow``)
``radix``          ``parts.radix.RadixOps``                       the tree of ``RadixPrefixCache``
=================  ============================================  =========================================

Guards (only around a learner's part; a kit part runs unwrapped, so the checks cost nothing when
only kit parts run): a part that raises, returns the wrong type, runs past ``time_limit_s``,
changes state it does not own or breaks an invariant raises :class:`~pagedlab.errors.ComponentError`
naming the slot, the engine step and the invariant. The engine then aborts the step's requests
(as for any failed step) and switches that slot back to the kit's part, so it stays usable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pagedlab.core.block_pool import FreeKVCacheBlockQueue
from pagedlab.core.copy_on_write import CopyOnWrite
from pagedlab.core.kv_cache_manager import find_longest_cache_hit
from pagedlab.core.radix_cache import RadixCache
from pagedlab.kernels.paged_kv import kit_slot_mapping
from pagedlab.kernels.reference import load_kv_tile
from pagedlab.parts.guard import Guard
from pagedlab.sched.scheduler import Scheduler, pick_victim, preempt_and_retry

__all__ = ["SLOTS", "Slot", "Part", "Components"]


@dataclass(frozen=True)
class Slot:
    """One slot: its name, what it does, the kit's implementation, and whether the engine calls it
    (which exercises fill it is the grader's business: ``pagedlab.grading.plug.BRIDGES``)."""

    name: str
    what: str
    kit: Any
    plugged: bool = True


SLOTS: dict[str, Slot] = {
    s.name: s
    for s in (
        Slot("free_queue", "free-block queue (LRU, O(1) remove)", FreeKVCacheBlockQueue),
        Slot("slot_mapping", "token position -> KV slot", kit_slot_mapping),
        Slot("fork_cow", "fork + copy-on-write append", CopyOnWrite),
        Slot(
            "schedule_step",
            "scheduling step (admission, budget, chunking)",
            Scheduler,
        ),
        Slot("pick_victim", "victim choice", pick_victim),
        Slot("preempt_retry", "preempt-and-retry loop", preempt_and_retry),
        Slot("prefix_lookup", "prefix-cache lookup (hash chain)", find_longest_cache_hit),
        Slot("radix", "radix match / insert / evict", RadixCache),
        Slot("kv_tile_load", "decode kernel K/V tile load", load_kv_tile),
        Slot("triton_tile_load", "Triton decode kernel's K/V tile load", None),
    )
}


@dataclass(frozen=True)
class Part:
    """What fills one slot: ``impl`` and whose it is (``"kit"`` or ``"yours"``); ``note`` says why."""

    slot: str
    impl: Any
    owner: str = "kit"
    note: str = ""


@dataclass(frozen=True)
class Components:
    """One implementation per slot (see the module docstring).

    Attributes:
        parts: slot name -> :class:`Part`.
        time_limit_s: seconds one call of a learner's part may take (0 = no limit); enforced with
            ``SIGALRM`` on the main thread only.
        render: optional ``render(slot, state) -> svg`` drawing the state where a guard tripped
            (the grading layer passes ``pagedlab.viz`` pictures in; the engine cannot import them).
    """

    parts: Mapping[str, Part]
    time_limit_s: float = 5.0
    render: Callable[[str, dict[str, Any]], str] | None = field(default=None, compare=False)

    @classmethod
    def kit(cls) -> Components:
        """Every slot filled with the kit's implementation."""
        return cls({name: Part(name, s.kit) for name, s in SLOTS.items()})

    def plug(self, slot: str, impl: Any, note: str = "") -> Components:
        """A copy with ``impl`` (the learner's) in ``slot``.

        Raises:
            KeyError: unknown slot (the message lists them).
            ValueError: the engine does not call that slot yet.
        """
        if slot not in SLOTS:
            raise KeyError(f"unknown component slot {slot!r}; slots: {', '.join(SLOTS)}")
        if not SLOTS[slot].plugged:
            raise ValueError(f"the engine does not run a plugged-in {slot} yet (the kit's part is used)")
        if impl is None:
            raise ValueError(f"slot {slot}: got None instead of an implementation")
        return replace(self, parts={**self.parts, slot: Part(slot, impl, "yours", note)})

    def with_kit(self, slot: str, note: str = "") -> Components:
        """A copy with the kit's part back in ``slot``."""
        return replace(self, parts={**self.parts, slot: Part(slot, SLOTS[slot].kit, "kit", note)})

    def is_yours(self, slot: str) -> bool:
        return self.parts[slot].owner == "yours"

    def covered(self, slot: str) -> str | None:
        """Why a learner's part in another slot does ``slot``'s work (its ``covers``), else None:
        lab 06's preempting step fills ``schedule_step`` and also preempts, retries and picks victims."""
        for part in self.parts.values():
            why = getattr(part.impl, "covers", {}).get(slot) if part.owner == "yours" else None
            if isinstance(why, str):
                return why
        return None

    def owner(self, slot: str) -> str:
        """``"yours"`` when a learner's part fills or covers ``slot``, else ``"kit"``."""
        return "yours" if self.is_yours(slot) or self.covered(slot) else "kit"

    @property
    def learner_slots(self) -> list[str]:
        """The slots whose work a learner's part does (filled or covered)."""
        return [s for s in self.parts if self.owner(s) == "yours"]

    def table(self) -> str:
        """Plain-text table: slot, whose part, what it does, note."""
        w = max(len("component"), *map(len, self.parts)) + 1
        rows = [f"{'component':<{w}} {'whose':<6} what"]
        for name, part in self.parts.items():
            slot = SLOTS[name]
            why = self.covered(name) or part.note  # covered: another part of yours does this slot's work
            note = f"  ({why})" if why else ("  (kit only for now)" if not slot.plugged else "")
            rows.append(f"{name:<{w}} {self.owner(name):<6} {slot.what}{note}")
        return "\n".join(rows)

    def guard(self, slot: str, step: Callable[[], int]) -> Guard:
        """A :class:`Guard` for ``slot``; ``step()`` gives the current engine step."""
        return Guard(slot, step, self.time_limit_s, self.render)
