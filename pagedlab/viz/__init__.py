"""Pictures of the memory system: pure SVG renderers and record-then-scrub players.

Renderers are pure functions ``snapshot -> SVG string`` (no widgets, no I/O), unit-tested by
parsing their output; each root ``<svg>`` has the class ``pl-viz`` plus its own
(``pl-pool``, ``pl-mapping``, ``pl-gantt``, ``pl-queues``, ``pl-radix``, ``pl-kernel``,
``pl-kv-usage``) and a ``data-step`` attribute, and each element a learner looks at carries
``data-*`` hooks (``data-block-id``, ``data-owner``, ``data-ref-cnt`` ...).

===========================  ==================================================================
``render_block_pool``        physical pool: owners, ref counts, shared, CoW copies, cached-free
``render_block_table``       one request: logical blocks -> block table -> physical blocks
``render_batch_gantt``       batch composition per step (prefill chunks and decodes)
``render_queues``            waiting / running / swapped over time
``render_radix_tree``        SGLang radix tree: spans, lock_ref, evicted nodes
``render_kernel_walk``       a kernel program's tiles over the block table, masked lanes
``render_kv_usage``          KV blocks in use per engine step
===========================  ==================================================================

``Player`` turns a list of frames into a widget; the ``*_player`` helpers build the common ones
straight from an engine run::

    llm = LLM(num_gpu_blocks=64, trace=True); llm.chat(...)
    kv_usage_player(llm.llm_engine.step_stats)
    pool_player(llm.llm_engine.tracer.events)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pagedlab.trace import rebuild_snapshots
from pagedlab.viz._svg import PALETTE, as_dict, owner_color
from pagedlab.viz.gantt import batch_steps, empty_step, render_batch_gantt
from pagedlab.viz.kernel import kernel_walk_steps, render_kernel_walk
from pagedlab.viz.mapping import mapping_frames, render_block_table, slot_of
from pagedlab.viz.pool import block_state, render_block_pool
from pagedlab.viz.queues import queue_history, render_queues
from pagedlab.viz.radix import as_tree_snapshot, radix_frames, render_radix_tree
from pagedlab.viz.usage import render_kv_usage

__all__ = [
    "Player",
    "PALETTE",
    "owner_color",
    "render_block_pool",
    "block_state",
    "render_block_table",
    "slot_of",
    "mapping_frames",
    "render_batch_gantt",
    "batch_steps",
    "empty_step",
    "render_queues",
    "queue_history",
    "render_radix_tree",
    "radix_frames",
    "as_tree_snapshot",
    "render_kernel_walk",
    "kernel_walk_steps",
    "render_kv_usage",
    "kv_usage_player",
    "pool_player",
    "gantt_player",
    "queues_player",
    "radix_player",
    "kernel_player",
    "mapping_player",
]


def __getattr__(name: str) -> Any:
    # ipywidgets is imported only when a player is asked for, so renderers work without it.
    if name == "Player":
        # lazy: start-up time (Player imports ipywidgets); renderers work without it
        from pagedlab.viz.player import Player

        return Player
    raise AttributeError(f"module 'pagedlab.viz' has no attribute {name!r}")


def _player(
    frames: Sequence[Any],
    render: Callable[[Any], str],
    caption: Any,
    interval: int,
    description: str = "step",
    start: int | None = None,
):
    from pagedlab.viz.player import Player  # lazy: start-up time (Player imports ipywidgets)

    return Player(
        frames,
        render=render,
        caption=caption,
        interval=interval,
        description=description,
        start=0 if start is None else start,
    )


def kv_usage_player(step_stats: Sequence[Any], num_gpu_blocks: int | None = None, interval: int = 250):
    """Live KV-block usage per engine step (lab 00): one frame per step.

    Args:
        step_stats: ``llm.llm_engine.step_stats``.
        num_gpu_blocks: pool size (default: used + free of the first step).
    """
    stats = list(step_stats)
    if not stats:
        raise ValueError("step_stats is empty: run the engine first")

    def caption(i: int, k: int) -> str:
        s = as_dict(stats[i])
        return (
            f"step {s['step']}: {s['kv_blocks_used']} blocks in use, "
            f"{len(s['scheduled'])} requests scheduled, {s.get('step_time', 0) * 1000:.0f} ms"
        )

    return _player(
        range(len(stats)), lambda i: render_kv_usage(stats, i, num_gpu_blocks=num_gpu_blocks), caption, interval
    )


def pool_player(
    tracer_events: Sequence[dict[str, Any]],
    num_blocks: int | None = None,
    per: str = "step",
    interval: int = 300,
    cols: int | None = None,
):
    """Block-pool grid per step (or per event) rebuilt from a tracer's events.

    Args:
        tracer_events: ``llm.llm_engine.tracer.events`` (or any ``Tracer.events``).
        num_blocks: pool size when the trace has no ``init`` event.
        per: ``"step"`` (one frame per engine step) or ``"event"`` (one per event, finest).
    """
    snaps = rebuild_snapshots(list(tracer_events), num_blocks, per=per)
    if not snaps:
        raise ValueError("the trace is empty: run with trace=True first")

    def caption(s: dict[str, Any], i: int) -> str:
        evs = s.get("events") or ([s["event"]] if s.get("event") else [])
        kinds: dict[str, int] = {}
        for e in evs:
            kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
        what = ", ".join(f"{v} {k}" for k, v in kinds.items()) or "no events"
        return f"step {s['step']}: {what}"

    return _player(snaps, lambda s: render_block_pool(s, cols=cols), caption, interval)


def gantt_player(step_stats: Sequence[Any], max_num_batched_tokens: int | None = None, interval: int = 250):
    """Batch composition per step (Gantt), from ``step_stats`` or tracer events."""
    steps = batch_steps(list(step_stats))
    if not steps:
        raise ValueError("no steps to show")
    return _player(
        range(len(steps)),
        lambda i: render_batch_gantt(steps, i, max_num_batched_tokens=max_num_batched_tokens),
        lambda i, k: (
            f"step {steps[i]['step']}: "
            + ", ".join(f"{r} {'prefill ' + str(n) if p else 'decode'}" for r, n, p in steps[i]["scheduled"])
        ),
        interval,
    )


def queues_player(history: Sequence[Any], interval: int = 250):
    """Waiting / running / swapped queues per step, from ``step_stats`` or queue dicts."""
    hist = list(history)
    if not hist:
        raise ValueError("no steps to show")
    return _player(range(len(hist)), lambda i: render_queues(hist, i), None, interval)


def radix_player(
    snapshots: Sequence[Any],
    token_text: Callable[[Sequence[int]], str] | None = None,
    captions: Sequence[str] | None = None,
    interval: int = 700,
):
    """Radix tree over time from consecutive ``RadixCache.snapshot()`` dicts (evictions diffed)."""
    frames = radix_frames(list(snapshots))
    if not frames:
        raise ValueError("no snapshots to show")
    return _player(
        frames, lambda f: render_radix_tree(token_text=token_text, **f), captions, interval, description="frame"
    )


def kernel_player(steps: Sequence[dict[str, Any]], interval: int = 600):
    """A kernel program's walk, one frame per tile (see ``kernel_walk_steps``)."""
    steps = list(steps)
    if not steps:
        raise ValueError("no kernel steps to show")
    return _player(steps, render_kernel_walk, None, interval, description="tile")


def mapping_player(frames: Sequence[dict[str, Any]], interval: int = 250):
    """One request growing token by token: logical blocks -> block table -> physical pool.

    Args:
        frames: :func:`mapping_frames` of the request (one per token).

    Raises:
        ValueError: no frames.
    """
    frames = list(frames)
    if not frames:
        raise ValueError("no mapping frames to show")
    return _player(frames, lambda kw: render_block_table(**kw), None, interval, description="tokens")
