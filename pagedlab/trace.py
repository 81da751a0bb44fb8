"""Event trace of the memory system and the scheduler, and pool snapshots rebuilt from it.

Widgets in the labs follow *record, then scrub*: run the algorithm once with a ``Tracer``
attached, then draw frame ``i`` from snapshot ``i``. Every event is a plain dict
``{"step": int, "kind": str, ...}`` holding only ints, strings, bools, lists and dicts, so a
trace can be dumped with ``json.dumps`` and graded offline.

Kinds recorded by ``pagedlab.core`` (fields besides ``step`` and ``kind``):

====================  ===========================================================================
``init``              ``num_gpu_blocks``, ``num_cpu_blocks``, ``block_size`` (``None`` from a bare pool)
``alloc``             ``block_ids`` popped from the free-queue front (ref 0 -> 1), ``owner``
``touch``             ``block_ids`` whose ref went +1 (removed from the free queue if it was 0), ``owner``
``free``              ``block_ids`` whose ref went -1, in the order freed; ``to_front`` / ``to_tail``: those
                      that reached 0, as ``BlockPool.free_blocks`` queued them (prepended in this order /
                      appended in this order; vLLM 0.32.0's rule lives there only); ``owner``;
                      ``cpu_block_ids`` when a swapped-out request is freed
``cache``             ``block_ids`` published to the prefix cache (``block_hashes`` hex, hash path) or
                      adopted by the radix tree (``owner="radix"``, ``from_owner`` = request handing over)
``evict``             ``block_ids`` whose cached content was dropped, ``cache`` = ``"hash"`` (lazy, when
                      the block is reused) or ``"radix"`` (the tree let go of a leaf)
``cache_hit``         ``request_id``, ``block_ids``, ``num_tokens``, ``preempted``: the prefix hit of a request
                      just admitted (once per admission, not per lookup; changes no state)
``fork``              ``parent``, ``child``, ``block_ids`` (one ref added per distinct block)
``cow_copy``          ``request_id``, ``src``, ``dst`` (the engine copies KV src -> dst before the forward)
``swap_out``          ``request_ids``, ``mapping`` ``[[gpu, cpu], ...]``, ``cpu_blocks`` (see snapshots)
``swap_in``           ``request_ids``, ``mapping`` ``[[cpu, gpu], ...]``
====================  ===========================================================================

The scheduler adds ``schedule``, ``preempt`` and ``finish``; ``rebuild_snapshots`` ignores kinds
it does not know, so any component may add its own.

Snapshot format (also returned by ``KVCacheManager.snapshot()``)::

    {"step": int, "num_gpu_blocks": int, "num_free_blocks": int,
     "free_queue": [block_id, ...],                      # LRU front first
     "blocks": [{"block_id": int, "ref_cnt": int, "owners": [str, ...],
                 "hashed": bool, "free": bool,            # hashed: in the prefix cache
                 "block_hash": hex str | None}, ...],     # indexed by block_id
     "cpu_blocks": [{"block_id": int, "ref_cnt": int, "owners": [str, ...]}, ...]}
"""

from __future__ import annotations

import copy
from typing import Any, TypeGuard


class Tracer:
    """Append-only list of JSON-serialisable events, stamped with a step counter.

    Attributes:
        enabled: when False, ``record`` returns at once (callers also test it before building
            an event, so a disabled tracer costs one attribute read per operation).
        step: the current engine step. The scheduler sets it at the start of each ``schedule()``
            (``tracer.step = step_count``, so events carry the engine's step number); code that
            drives a ``KVCacheManager`` by hand (tests, lab 07) advances it with ``next_step()``.
        events: the recorded events, in order.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.step = 0
        self.events: list[dict[str, Any]] = []

    def record(self, kind: str, **data: Any) -> None:
        """Append ``{"step": self.step, "kind": kind, **data}`` when enabled.

        Args:
            kind: event name (see the module docstring).
            **data: JSON-serialisable fields (ints, str, bool, None, lists, dicts).
        """
        if not self.enabled:
            return
        event = {"step": self.step, "kind": kind}
        event.update(data)
        self.events.append(event)

    def next_step(self) -> int:
        """Advance the step counter and return the new step number."""
        self.step += 1
        return self.step

    def clear(self) -> None:
        """Drop all events and reset the step counter to 0."""
        self.events.clear()
        self.step = 0


def _active(tracer: Tracer | None) -> TypeGuard[Tracer]:
    """True when ``tracer`` exists and is enabled (narrows ``Tracer | None`` for the type checker)."""
    return tracer is not None and tracer.enabled


class _PoolState:
    """Mutable replay state; ``freeze`` turns it into the snapshot dict."""

    def __init__(self, num_gpu_blocks: int) -> None:
        self.num_gpu_blocks = num_gpu_blocks
        self.ref = [0] * num_gpu_blocks
        self.owners: list[list[str]] = [[] for _ in range(num_gpu_blocks)]
        self.hashed = [False] * num_gpu_blocks
        self.hash_hex: list[str | None] = [None] * num_gpu_blocks
        # A dict keeps insertion order: appending = re-inserting, remove from the middle = del.
        self.queue: dict[int, None] = dict.fromkeys(range(num_gpu_blocks))
        self.cpu: dict[int, dict[str, Any]] = {}

    def apply(self, ev: dict[str, Any]) -> None:
        """Replay one trace event onto the pool picture (an unknown kind changes nothing)."""
        handler = getattr(self, "_on_" + ev["kind"], None)
        if handler is not None:
            handler(ev, ev.get("block_ids", ()), ev.get("owner"))

    def _on_alloc(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        for b in ids:
            self.queue.pop(b, None)
            self.ref[b] = 1
            self.owners[b] = [owner] if owner is not None else []

    def _on_touch(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        for b in ids:
            self.queue.pop(b, None)
            self.ref[b] += 1
            if owner is not None:
                self.owners[b].append(owner)

    def _on_free(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        front, tail = list(ev.get("to_front", ())), list(ev.get("to_tail", ()))
        for b in ids:
            self.ref[b] -= 1
            if owner in self.owners[b]:
                self.owners[b].remove(owner)
        reached_zero = sorted({b for b in ids if self.ref[b] == 0})
        if sorted(front + tail) != reached_zero:
            raise ValueError(
                f"free event of step {ev.get('step')}: blocks {reached_zero} reached 0 references but the event "
                f"queues to_front={front}, to_tail={tail} (each freed block must be named in one of them)"
            )
        # the event says where each block went (the rule is BlockPool.free_blocks'); replay it
        self.queue = dict.fromkeys([*front, *self.queue, *tail])
        for c in ev.get("cpu_block_ids", ()):  # a swapped-out request was freed
            entry = self.cpu[c]
            entry["ref_cnt"] -= 1
            if owner in entry["owners"]:
                entry["owners"].remove(owner)
            if entry["ref_cnt"] == 0:
                del self.cpu[c]

    def _on_fork(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        for b in ids:
            self.ref[b] += 1
            self.owners[b].append(ev["child"])

    def _on_cache(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        ids = list(ids)
        hexes = ev.get("block_hashes") or [None] * len(ids)
        src = ev.get("from_owner")
        for b, hx in zip(ids, hexes, strict=True):
            self.hashed[b] = True
            self.hash_hex[b] = hx
            if src is not None:  # ownership handed from a request to the radix tree
                if src in self.owners[b]:
                    self.owners[b].remove(src)
                self.owners[b].append(owner)

    def _on_evict(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        for b in ids:
            self.hashed[b] = False
            self.hash_hex[b] = None

    def _on_swap_out(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        for cb in ev["cpu_blocks"]:
            self.cpu[cb["block_id"]] = {
                "block_id": cb["block_id"],
                "ref_cnt": cb["ref_cnt"],
                "owners": list(cb["owners"]),
            }

    def _on_swap_in(self, ev: dict[str, Any], ids: Any, owner: Any) -> None:
        # Each swapped-in request drops its reference on the CPU copy; others may keep it.
        for cpu_id, _ in ev["mapping"]:
            entry = self.cpu[cpu_id]
            for rid in ev["request_ids"]:
                if rid in entry["owners"]:
                    entry["owners"].remove(rid)
                    entry["ref_cnt"] -= 1
            if entry["ref_cnt"] == 0:
                del self.cpu[cpu_id]

    def freeze(self, step: int) -> dict[str, Any]:
        return {
            "step": step,
            "num_gpu_blocks": self.num_gpu_blocks,
            "num_free_blocks": len(self.queue),
            "free_queue": list(self.queue),
            "blocks": [
                {
                    "block_id": i,
                    "ref_cnt": self.ref[i],
                    "owners": sorted(self.owners[i]),
                    "hashed": self.hashed[i],
                    "free": self.ref[i] == 0,
                    "block_hash": self.hash_hex[i],
                }
                for i in range(self.num_gpu_blocks)
            ],
            "cpu_blocks": [copy.deepcopy(self.cpu[k]) for k in sorted(self.cpu)],
        }


def rebuild_snapshots(
    events: list[dict[str, Any]], num_gpu_blocks: int | None = None, per: str = "step"
) -> list[dict[str, Any]]:
    """Replay a trace into pool snapshots (see the module docstring for the format).

    Args:
        events: a ``Tracer.events`` list; must start at the pool's creation (an ``init`` event)
            unless ``num_gpu_blocks`` is given.
        num_gpu_blocks: pool size, when the trace has no ``init`` event.
        per: ``"step"`` gives one snapshot at the end of each step present in the trace;
            ``"event"`` gives one snapshot after every event (finest scrubbing).

    Returns:
        A list of snapshot dicts; ``per="step"`` snapshots also carry ``events`` (the events of
        that step), ``per="event"`` snapshots carry ``event`` (the event just applied).

    Raises:
        ValueError: the pool size cannot be determined, or ``per`` is unknown.
    """
    if per not in ("step", "event"):
        raise ValueError(f"per must be 'step' or 'event', got {per!r}")
    if num_gpu_blocks is None:
        inits = [e for e in events if e["kind"] == "init"]
        if not inits:
            raise ValueError("trace has no 'init' event; pass num_gpu_blocks")
        num_gpu_blocks = inits[0]["num_gpu_blocks"]
    state = _PoolState(num_gpu_blocks)
    out: list[dict[str, Any]] = []
    step_events: list[dict[str, Any]] = []
    for i, ev in enumerate(events):
        state.apply(ev)
        if per == "event":
            snap = state.freeze(ev["step"])
            snap["event"] = dict(ev)
            out.append(snap)
            continue
        step_events.append(dict(ev))
        last_of_step = i + 1 == len(events) or events[i + 1]["step"] != ev["step"]
        if last_of_step:
            snap = state.freeze(ev["step"])
            snap["events"] = step_events
            out.append(snap)
            step_events = []
    return out
