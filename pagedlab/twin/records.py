"""The twin runner's shared vocabulary: a workload, the step trace both engines give, the diff, the driver.

Standard library only: the vLLM side (``pagedlab/twin/vllm_side.py``) runs in vLLM's own virtual
environment, where pagedlab is not installed, and loads this file by path. Everything here is plain data
that round-trips through JSON (``to_json`` / ``from_json``).

A **workload** is token-id requests with their ``SamplingParams`` fields, the engine step each arrives
at, its priority, and the step at which it is aborted (if any), plus engine settings under vLLM's names.
:func:`drive` plays it on an engine through a small adapter, identically for both engines: at every step,
first the arrivals of that step (in list order), then the aborts of that step, then one engine step.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "Divergence",
    "EngineSettings",
    "StepRecord",
    "Trace",
    "TwinRequest",
    "Workload",
    "diff",
    "drive",
    "first_block_id_difference",
    "record_pool",
]

#: Steps after which :func:`drive` gives up (a workload that never finishes is a bug on one side).
MAX_STEPS = 20_000


@dataclass
class EngineSettings:
    """Engine arguments, vLLM's names and meanings (vLLM version: ``pagedlab.vllm_version``).

    ``num_gpu_blocks`` is vLLM's ``num_gpu_blocks_override``: it counts vLLM's null block, so
    ``num_gpu_blocks - 1`` blocks hold KV, on both engines.
    """

    block_size: int = 32
    num_gpu_blocks: int = 64
    max_num_batched_tokens: int = 256
    max_num_seqs: int = 8
    enable_chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0
    enable_prefix_caching: bool = False
    scheduling_policy: str = "fcfs"
    #: vLLM's ``SchedulerConfig.watermark`` (fraction of the pool kept free when admitting).
    watermark: float = 0.0
    #: None: what the pool holds, ``(num_gpu_blocks - 1) * block_size`` (vLLM 0.32 refuses to start when
    #: one request of ``max_model_len`` tokens would not fit in the pool).
    max_model_len: int | None = None

    def engine_args(self) -> dict[str, Any]:
        """The ``EngineArgs`` keywords both engines take."""
        d = dataclasses.asdict(self)
        d["num_gpu_blocks_override"] = d.pop("num_gpu_blocks")
        if d["max_model_len"] is None:
            d["max_model_len"] = (self.num_gpu_blocks - 1) * self.block_size
        return d


@dataclass
class TwinRequest:
    """One request: token ids, ``SamplingParams`` keywords, arrival step, priority, abort step."""

    request_id: str
    prompt_token_ids: list[int]
    sampling: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 8})
    arrival_step: int = 0
    priority: int = 0
    abort_step: int | None = None


@dataclass
class Workload:
    name: str
    engine: EngineSettings
    requests: list[TwinRequest]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        return cls(d["name"], EngineSettings(**d["engine"]), [TwinRequest(**r) for r in d["requests"]])

    def check(self) -> None:
        """Raises ValueError: duplicate request ids, an empty prompt, a negative arrival or abort step."""
        ids = [r.request_id for r in self.requests]
        if len(set(ids)) != len(ids):
            raise ValueError(f"workload {self.name!r}: duplicate request ids in {ids}")
        for r in self.requests:
            if not r.prompt_token_ids:
                raise ValueError(f"workload {self.name!r}: request {r.request_id!r} has an empty prompt")
            if r.arrival_step < 0 or (r.abort_step is not None and r.abort_step < r.arrival_step):
                raise ValueError(
                    f"workload {self.name!r}: request {r.request_id!r} arrives at a negative step or is "
                    f"aborted before it arrives (arrival_step={r.arrival_step}, abort_step={r.abort_step})"
                )


@dataclass
class StepRecord:
    """What one engine step decided.

    Attributes:
        step: the driver's step number (arrivals and aborts happen at the start of it).
        scheduled: ``[request_id, num_tokens]`` in scheduling order (running first, then waiting).
        preempted: request ids preempted in this step, in order.
        num_cached_tokens: ``request_id -> num_cached_tokens`` for requests scheduled for the first time.
        finished: ``[request_id, finish_reason]`` of requests that ended in this step (aborts included).

    The pool, as ``schedule()`` left it (after its allocations and preemptions, before this step's
    finished requests are freed); None where an adapter does not record it. Block ids are the kit's:
    vLLM 0.32's ids less one, since its block 0 is the null block that never holds KV (``BlockPool.__init__``
    pops it), so both engines number their ``num_gpu_blocks - 1`` KV blocks ``0 ..`` (the null block, were it
    ever seen, would read ``-1``).

        block_ids: ``request_id -> block table`` of every request holding blocks.
        num_free_blocks: free blocks (the free queue's length).
        free_queue: the free queue's block ids, front (handed out next) first.
        hashed_blocks: ids of blocks that carry a prefix-cache hash (in use or cached-and-free), ascending.
        hit_block_ids: ``request_id -> the blocks its prefix-cache hit reused`` for requests scheduled for
            the first time (the first ``num_cached_tokens // block_size`` entries of its block table).
    """

    step: int
    scheduled: list[list[Any]] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    num_cached_tokens: dict[str, int] = field(default_factory=dict)
    finished: list[list[Any]] = field(default_factory=list)
    block_ids: dict[str, list[int]] | None = None
    num_free_blocks: int | None = None
    free_queue: list[int] | None = None
    hashed_blocks: list[int] | None = None
    hit_block_ids: dict[str, list[int]] | None = None


#: The pool fields of :class:`StepRecord`, in the order :func:`diff` compares them.
POOL_FIELDS = ("num_free_blocks", "block_ids", "hit_block_ids", "free_queue", "hashed_blocks")


def record_pool(
    record: StepRecord,
    tables: dict[str, list[int]],
    free_queue: list[int],
    hashed: list[int],
    block_size: int,
) -> None:
    """Fill ``record``'s pool fields from one engine's state (block ids already in the kit's numbering);
    call after ``record.num_cached_tokens`` is set for the step's new requests."""
    record.block_ids = {rid: list(ids) for rid, ids in tables.items() if ids}
    record.free_queue = list(free_queue)
    record.num_free_blocks = len(free_queue)
    record.hashed_blocks = sorted(hashed)
    record.hit_block_ids = {
        rid: list(tables.get(rid, []))[: n // block_size] for rid, n in record.num_cached_tokens.items()
    }


@dataclass
class Trace:
    """One engine's run of a workload: the steps, and each request's completions (token ids) and finish reasons."""

    engine: str
    workload: str
    steps: list[StepRecord] = field(default_factory=list)
    tokens: dict[str, list[list[int]]] = field(default_factory=dict)
    finish_reasons: dict[str, list[str | None]] = field(default_factory=dict)
    num_free_blocks: int | None = None  #: free KV blocks before the first request (vLLM: less its null block)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        steps = [StepRecord(**s) for s in d["steps"]]
        return cls(d["engine"], d["workload"], steps, d["tokens"], d["finish_reasons"], d.get("num_free_blocks"))


@dataclass
class Divergence:
    """The first place two traces differ."""

    step: int | None  #: the step number (None: a per-request field after the run, e.g. tokens)
    request_id: str | None
    field: str
    left: Any
    right: Any
    left_engine: str = "kit"
    right_engine: str = "vllm"

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "after the run"
        who = f", request {self.request_id!r}" if self.request_id is not None else ""
        return f"{where}{who}, {self.field}: {self.left_engine}={self.left!r} vs {self.right_engine}={self.right!r}"


def _first_list_difference(
    step: int, name: str, a: list[Any], b: list[Any], key: Callable[[Any], str | None]
) -> Divergence | None:
    for x, y in zip(a, b):
        if x != y:
            return Divergence(step, key(x), name, x, y)
    if len(a) != len(b):
        extra = a[len(b)] if len(a) > len(b) else b[len(a)]
        return Divergence(step, key(extra), name, a[len(b) :] or None, b[len(a) :] or None)
    return None


def diff(left: Trace, right: Trace, *, schedule: bool = True, tokens: bool = True) -> Divergence | None:
    """The first divergence between two traces, or None when they agree.

    Steps are compared in order, field by field (scheduled, preempted, finished, num_cached_tokens, then
    the pool both traces recorded: what decisions change, then the block ids themselves, ``_diff_pool``);
    then each request's token ids and finish reasons. ``schedule=False`` compares only the outcome
    (tokens and finish reasons); ``tokens=False`` only the steps.
    """
    found = None
    if left.num_free_blocks != right.num_free_blocks:
        found = Divergence(0, None, "num_free_blocks", left.num_free_blocks, right.num_free_blocks)
    if found is None and schedule:
        found = _diff_steps(left, right)
    if found is None and tokens:
        found = _diff_outcomes(left, right)
    if found is not None:
        found.left_engine, found.right_engine = left.engine, right.engine
    return found


def _diff_steps(left: Trace, right: Trace) -> Divergence | None:
    for a, b in zip(left.steps, right.steps):
        if a.step != b.step:
            return Divergence(
                min(a.step, b.step), None, "step (one engine stepped, the other was idle)", a.step, b.step
            )
        for name in ("scheduled", "preempted", "finished"):
            key = (lambda x: x) if name == "preempted" else (lambda x: x[0])
            found = _first_list_difference(a.step, name, getattr(a, name), getattr(b, name), key)
            if found is not None:
                return found
        for rid in sorted(set(a.num_cached_tokens) | set(b.num_cached_tokens)):
            x, y = a.num_cached_tokens.get(rid), b.num_cached_tokens.get(rid)
            if x != y:
                return Divergence(a.step, rid, "num_cached_tokens", x, y)
        found = _diff_pool(a, b)
        if found is not None:
            return found
    if len(left.steps) != len(right.steps):
        longer = left.steps if len(left.steps) > len(right.steps) else right.steps
        extra = longer[min(len(left.steps), len(right.steps))]
        ln, rn = len(left.steps), len(right.steps)
        return Divergence(extra.step, None, "number of steps", ln, rn)
    return None


def _diff_pool(a: StepRecord, b: StepRecord) -> Divergence | None:
    """The first pool difference of one step that both records carry.

    First what a decision changes: the free count, which requests hold how many blocks, and which blocks
    they share or a prefix hit reused (one kit id maps to one vLLM id within the step, both ways); then
    the ids themselves, in :data:`POOL_FIELDS` order: block tables, hit blocks, the free queue (front
    first) and the hashed blocks. The kit frees blocks as vLLM 0.32.0 does (``BlockPool.free_blocks``,
    ``v1/core/block_pool.py:774-805``: no hash to the queue's front, hashed to its tail), so every id
    agrees at every step. (Before the kit followed it, it kept vLLM 0.11's tail for every block, ids
    were compared only up to a renaming, and the number of hashed blocks only before the first id
    difference: ``prefix_eviction`` kept 6 cached blocks on the kit, 7 on vLLM.)
    """
    if a.block_ids is None or b.block_ids is None:
        return None
    if a.num_free_blocks != b.num_free_blocks:
        return Divergence(a.step, None, "num_free_blocks", a.num_free_blocks, b.num_free_blocks)
    found = _renaming_difference(a, b)
    if found is not None:
        return found
    return _first_id_difference(a, b, POOL_FIELDS[1:])


def _renaming_difference(a: StepRecord, b: StepRecord) -> Divergence | None:
    """Block tables and hit lists of different lengths, or not one renaming of ids (kit -> vLLM, 1:1)."""
    renaming: dict[int, int] = {}
    inverse: dict[int, int] = {}
    for name in ("block_ids", "hit_block_ids"):
        x_map, y_map = getattr(a, name) or {}, getattr(b, name) or {}
        for rid in sorted(set(x_map) | set(y_map)):
            x, y = x_map.get(rid, []), y_map.get(rid, [])
            if len(x) != len(y):
                return Divergence(a.step, rid, f"{name} (count)", x, y)
            for i, j in zip(x, y):
                if renaming.setdefault(i, j) != j or inverse.setdefault(j, i) != i:
                    return Divergence(a.step, rid, f"{name} (which blocks are shared)", x, y)
    return None


def _first_id_difference(a: StepRecord, b: StepRecord, fields: tuple[str, ...]) -> Divergence | None:
    """The first of ``fields`` whose recorded ids differ in one step (per request for the tables), or None."""
    for name in fields:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None or x == y:
            continue
        if isinstance(x, dict):
            rid = next(r for r in sorted(set(x) | set(y)) if x.get(r) != y.get(r))
            return Divergence(a.step, rid, name, x.get(rid), y.get(rid))
        return Divergence(a.step, None, name, x, y)
    return None


def first_block_id_difference(left: Trace, right: Trace, fields: tuple[str, ...] = POOL_FIELDS) -> Divergence | None:
    """The first step at which the recorded block ids themselves differ (``fields`` in :data:`POOL_FIELDS`
    order, per request for the tables), or None. :func:`diff` reports it too (see :func:`_diff_pool`);
    this finds it even after an earlier divergence of decisions."""
    right_steps = {r.step: r for r in right.steps}
    for a in left.steps:
        b = right_steps.get(a.step)
        found = None if b is None else _first_id_difference(a, b, fields)
        if found is not None:
            found.left_engine, found.right_engine = left.engine, right.engine
            return found
    return None


def _diff_outcomes(left: Trace, right: Trace) -> Divergence | None:
    for rid in sorted(set(left.tokens) | set(right.tokens)):
        for name, a, b in (
            ("tokens", left.tokens.get(rid), right.tokens.get(rid)),
            ("finish_reasons", left.finish_reasons.get(rid), right.finish_reasons.get(rid)),
        ):
            if a != b:
                return Divergence(None, rid, name, a, b)
    return None


# ----------------------------------------------------------------------------------------- driver


#: One completion of an engine's output: ``(CompletionOutput.index, token ids so far, finish reason)``.
Completion = tuple[int, list[int], str | None]


class Adapter(Protocol):
    """What :func:`drive` needs of an engine (each side implements it over its own ``LLMEngine``)."""

    name: str

    def add(self, request: TwinRequest) -> None: ...

    def abort(self, request_id: str) -> None: ...

    def has_unfinished(self) -> bool: ...

    def num_free_blocks(self) -> int: ...

    def step(self, record: StepRecord) -> list[tuple[str, list[Completion], bool]]:
        """Run one engine step, filling ``record`` (scheduled, preempted, num_cached_tokens); return
        ``(request_id, completions, finished)`` for each output the step produced, a completion being
        ``(index, token ids so far, finish reason)``. An output may carry only some of a request's
        completions (vLLM 0.32 reports each child of an ``n > 1`` request on its own): :func:`drive`
        merges them by index."""
        ...


def drive(workload: Workload, adapter: Adapter) -> Trace:  # noqa: C901 - one branch per workload event kind
    """Play ``workload`` on the engine behind ``adapter`` and return its trace.

    Raises:
        ValueError: a malformed workload (``Workload.check``).
        RuntimeError: the engine has not finished after ``MAX_STEPS`` steps.
    """
    workload.check()
    trace = Trace(adapter.name, workload.name, num_free_blocks=adapter.num_free_blocks())
    by_arrival: dict[int, list[TwinRequest]] = {}
    by_abort: dict[int, list[str]] = {}
    for r in workload.requests:
        by_arrival.setdefault(r.arrival_step, []).append(r)
        if r.abort_step is not None:
            by_abort.setdefault(r.abort_step, []).append(r.request_id)
    last_event = max([*by_arrival, *by_abort, 0])
    pending_done = {r.request_id for r in workload.requests}
    completions: dict[str, dict[int, tuple[list[int], str | None]]] = {}
    for step in range(MAX_STEPS):
        for r in by_arrival.get(step, []):
            adapter.add(r)
        record = StepRecord(step)
        for rid in by_abort.get(step, []):
            if rid in pending_done:
                adapter.abort(rid)
                record.finished.append([rid, "abort"])
                trace.finish_reasons[rid] = ["abort"]
                trace.tokens.setdefault(rid, [])
                pending_done.discard(rid)
        if adapter.has_unfinished():
            for rid, outs, finished in adapter.step(record):
                got = completions.setdefault(rid, {})
                got.update((index, (toks, reason)) for index, toks, reason in outs)
                trace.tokens[rid] = [got[i][0] for i in sorted(got)]
                if finished:
                    reasons = [got[i][1] for i in sorted(got)]
                    trace.finish_reasons[rid] = reasons
                    record.finished.append([rid, reasons[0] if len(set(reasons)) == 1 else reasons])
                    pending_done.discard(rid)
            trace.steps.append(record)
        elif record.finished:
            trace.steps.append(record)
        elif step >= last_event:
            return trace
    raise RuntimeError(f"workload {workload.name!r} did not finish on {adapter.name} in {MAX_STEPS} steps")


def to_json(obj: Workload | Trace | list[Any]) -> str:
    if isinstance(obj, list):
        return json.dumps([o.to_dict() for o in obj])
    return json.dumps(obj.to_dict())
