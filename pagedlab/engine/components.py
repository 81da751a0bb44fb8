"""The engine's teachable parts, under the name the notebooks use: ``Components`` and the slot
registry live in :mod:`pagedlab.parts.slots` (the plug-in layer below the engine), the guards
around a learner's part in the rest of :mod:`pagedlab.parts`.

    from pagedlab.engine.components import Components
    llm = LLM(components=Components.kit().plug("slot_mapping", my_slot_mapping))
"""

from __future__ import annotations

from pagedlab.parts.protocols import (
    FreeQueue,
    KVTileLoadFn,
    PickVictimFn,
    PreemptRetryFn,
    PrefixLookupFn,
    ScheduleStepFn,
    SlotMappingFn,
)
from pagedlab.parts.slots import SLOTS, Components, Part, Slot

__all__ = [
    "SLOTS",
    "Slot",
    "Part",
    "Components",
    "FreeQueue",
    "SlotMappingFn",
    "ScheduleStepFn",
    "PickVictimFn",
    "PrefixLookupFn",
    "KVTileLoadFn",
    "PreemptRetryFn",
]
