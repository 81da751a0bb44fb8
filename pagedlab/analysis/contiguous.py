"""Contiguous max-length reservation vs paging: the fragmentation experiment of lab 01.

Before PagedAttention, a serving system reserved one contiguous KV region per request, sized
for the longest the request could become (the vLLM paper's Orca baselines, section 6.1):

* ``"max"``    - ``max_model_len`` tokens (Orca (Max));
* ``"oracle"`` - exactly ``prompt + output`` tokens, as if the output length were known (Orca (Oracle));
* ``"pow2"``   - the next power of two >= ``prompt + output`` (Orca (Pow2), over-reserves up to 2x).

``replay_contiguous`` places reservations first-fit in a flat token arena; ``replay_paged``
runs the same requests through the real ``KVCacheManager`` with blocks of ``block_size``.
Both advance in iterations (each running request gains one token per step, its prefill in the
step it is admitted; admission is FCFS with head-of-line blocking) and account every token of
capacity at every step as one of:

* ``used``          - holds a token's KV;
* ``reservation``   - reserved for a token the request will generate later;
* ``internal``      - reserved but never used (beyond the final length; paged: rest of the last block);
* ``external``      - free, but in holes too small for the request waiting at the head of the queue;
* ``free``          - the rest.

Both replays take :class:`pagedlab.sim.traces.TraceRequest` lists (as ``load_azure`` returns them)
and prepare them with :func:`prepare_trace`. This is a lab-only baseline, not part of the engine.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request
from pagedlab.sim.traces import TraceRequest

__all__ = [
    "CATEGORIES",
    "FirstFitArena",
    "ReplayClock",
    "Reservation",
    "ContiguousStep",
    "prepare_trace",
    "reservation_size",
    "contiguous_replay_steps",
    "contiguous_snapshot",
    "contiguous_accounting",
    "replay_contiguous",
    "paged_replay_steps",
    "paged_accounting",
    "replay_paged",
]

CATEGORIES = ("used", "reservation", "internal", "external", "free")
POLICIES = ("max", "oracle", "pow2")


class ReplayClock(TypedDict, total=False):
    """The clock options of both replays, passed on unchanged by ``replay_contiguous`` and
    ``replay_paged`` to the step loops, whose defaults hold when one is left out."""

    step_time: float  # seconds per iteration: a request arriving at t joins at step ceil(t / step_time)
    max_steps: int  # safety cap on iterations: the loop stops there, whatever still runs or waits


def prepare_trace(requests: Sequence[TraceRequest], max_model_len: int) -> list[TraceRequest]:
    """The requests a replay runs: sorted by arrival, rebased so the trace's first request arrives at 0 s.

    A request whose prompt does not fit (``prompt_len >= max_model_len``) is dropped; an empty prompt
    counts as 1 token; outputs are cut to fit ``max_model_len`` and raised to at least 1 token (every
    request samples one). ``hash_ids`` and the other fields are kept.

    Raises:
        ValueError: ``max_model_len < 2``.
    """
    if max_model_len < 2:
        raise ValueError(f"max_model_len must be >= 2, got {max_model_len}")
    reqs = sorted(requests, key=lambda r: r.arrival_time)
    t0 = reqs[0].arrival_time if reqs else 0.0
    return [
        dataclasses.replace(
            r,
            arrival_time=r.arrival_time - t0,
            prompt_len=max(1, r.prompt_len),
            output_len=min(max(1, r.output_len), max_model_len - max(1, r.prompt_len)),
        )
        for r in reqs
        if r.prompt_len < max_model_len
    ]


def reservation_size(prompt_len: int, output_len: int, max_model_len: int, policy: str) -> int:
    """Tokens reserved for one request under ``policy`` ("max" | "oracle" | "pow2"), capped at max_model_len.

    Raises:
        ValueError: an unknown policy.
    """
    final = prompt_len + output_len
    if policy == "max":
        return max_model_len
    if policy == "oracle":
        return min(final, max_model_len)
    if policy == "pow2":
        return min(1 << (final - 1).bit_length(), max_model_len)
    raise ValueError(f"policy must be 'max', 'oracle' or 'pow2', got {policy!r}")


class FirstFitArena:
    """A flat arena of ``capacity`` token slots with first-fit placement of contiguous segments."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.segments: list[tuple[int, int]] = []  # (start, size), sorted by start

    def holes(self) -> list[int]:
        """Sizes of the free gaps, in address order."""
        out, pos = [], 0
        for start, size in self.segments:
            if start > pos:
                out.append(start - pos)
            pos = start + size
        if self.capacity > pos:
            out.append(self.capacity - pos)
        return out

    def allocate(self, size: int) -> int | None:
        """Start of the first gap that fits ``size`` tokens (now taken), or None."""
        pos = 0
        for start, seg in self.segments:
            if start - pos >= size:
                break
            pos = start + seg
        if pos + size > self.capacity:
            return None
        bisect.insort(self.segments, (pos, size))
        return pos

    def free(self, start: int) -> None:
        """Release the segment that starts at ``start``.

        Raises:
            KeyError: no segment starts there.
        """
        i = bisect.bisect_left(self.segments, (start, -1))
        if i == len(self.segments) or self.segments[i][0] != start:
            raise KeyError(f"no segment starts at slot {start}")
        del self.segments[i]


@dataclass
class Reservation:
    """A running request of the contiguous replay: its region and how many tokens it holds."""

    request_id: str
    request: TraceRequest
    start: int
    size: int
    num_tokens: int

    @property
    def final_len(self) -> int:
        """Tokens the request will hold when it finishes (prompt + output)."""
        return self.request.prompt_len + self.request.output_len


@dataclass
class ContiguousStep:
    """The contiguous replay's state after admission in one step (see :func:`contiguous_replay_steps`)."""

    step: int
    arena: FirstFitArena
    running: list[Reservation]
    num_waiting: int
    next_request_size: int  # the reservation the head of the queue needs (0: nobody waits)
    finished: int = 0  # cumulative
    num_requests: int = 0  # after prepare_trace


def contiguous_replay_steps(
    requests: Sequence[TraceRequest],
    capacity_tokens: int,
    max_model_len: int,
    policy: str = "max",
    step_time: float = 0.05,
    max_steps: int = 100_000,
    id_prefix: str = "r",
) -> Iterator[ContiguousStep]:
    """The contiguous replay loop, one step at a time (shared by ``replay_contiguous`` and lab 01).

    Each step: arrivals join the queue (request ids ``<id_prefix><i>``, ``i`` the index in arrival
    order); queued requests get a first-fit reservation of ``reservation_size`` while one fits
    (FCFS, head-of-line blocking); the state is yielded; then each running request samples one
    token and finished ones free their region. The same object is updated in place: do not mutate it.

    Raises:
        ValueError: an unknown policy.
    """
    reservation_size(1, 1, max_model_len, policy)  # reject an unknown policy before the first step
    reqs = prepare_trace(requests, max_model_len)
    st = ContiguousStep(0, FirstFitArena(capacity_tokens), [], 0, 0, num_requests=len(reqs))
    queue: list[tuple[str, TraceRequest]] = []
    i = 0
    while (i < len(reqs) or queue or st.running) and st.step < max_steps:
        while i < len(reqs) and reqs[i].arrival_time <= st.step * step_time:
            queue.append((f"{id_prefix}{i}", reqs[i]))
            i += 1
        while queue:
            rid, r = queue[0]
            size = reservation_size(r.prompt_len, r.output_len, max_model_len, policy)
            start = st.arena.allocate(size)
            if start is None:
                break
            queue.pop(0)
            st.running.append(Reservation(rid, r, start, size, r.prompt_len))  # prefill now
        head = queue[0][1] if queue else None
        st.next_request_size = reservation_size(head.prompt_len, head.output_len, max_model_len, policy) if head else 0
        st.num_waiting = len(queue)
        yield st
        still = []
        for res in st.running:
            if res.num_tokens - res.request.prompt_len + 1 >= res.request.output_len:  # sampled the last token
                st.arena.free(res.start)
                st.finished += 1
            else:
                res.num_tokens += 1
                still.append(res)
        st.running = still
        st.step += 1


def contiguous_snapshot(st: ContiguousStep) -> dict[str, Any]:
    """One step of the contiguous replay in the format lab 01's ``waste_accounting`` exercise takes.

    Returns:
        ``{"capacity", "next_request_size", "requests": [{"id", "start", "reserved", "num_tokens",
        "final_len"}]}`` (token slots).
    """
    return {
        "capacity": st.arena.capacity,
        "next_request_size": st.next_request_size,
        "requests": [
            {
                "id": r.request_id,
                "start": r.start,
                "reserved": r.size,
                "num_tokens": r.num_tokens,
                "final_len": r.final_len,
            }
            for r in st.running
        ],
    }


def contiguous_accounting(st: ContiguousStep) -> dict[str, int]:
    """One step of the contiguous replay, accounted: token slots per category of :data:`CATEGORIES`,
    plus ``step``, ``num_running`` and ``num_waiting`` (a row of ``replay_contiguous``'s ``steps``)."""
    acc = dict.fromkeys(CATEGORIES, 0)
    for r in st.running:
        acc["used"] += r.num_tokens
        acc["reservation"] += r.final_len - r.num_tokens
        acc["internal"] += r.size - r.final_len
    holes = st.arena.holes()
    acc["external"] = sum(h for h in holes if h < st.next_request_size)
    acc["free"] = sum(holes) - acc["external"]
    acc.update(step=st.step, num_running=len(st.running), num_waiting=st.num_waiting)
    return acc


def _summary(steps: list[dict[str, int]], capacity: int, finished: int, total: int) -> dict[str, float]:
    busy = [s for s in steps if s["num_running"]] or steps
    if not busy:
        return dict.fromkeys([f"{c}_frac" for c in CATEGORIES] + ["utilization", "mean_batch"], 0.0) | {
            "steps": 0,
            "finished": finished,
            "requests": total,
        }
    out = {f"{c}_frac": sum(s[c] for s in busy) / (len(busy) * capacity) for c in CATEGORIES}
    occupied = sum(out[f"{c}_frac"] for c in CATEGORIES if c != "free")
    # The paper's Fig. 2 figure: share of the occupied KV memory that holds token states.
    out["utilization"] = out["used_frac"] / occupied if occupied else 0.0
    out["mean_batch"] = sum(s["num_running"] for s in busy) / len(busy)
    out.update(steps=len(steps), finished=finished, requests=total)
    return out


def replay_contiguous(
    requests: Sequence[TraceRequest],
    capacity_tokens: int,
    max_model_len: int,
    policy: str = "max",
    **clock: Unpack[ReplayClock],
) -> dict[str, Any]:
    """Replay ``requests`` with contiguous reservations; return ``{"steps": [...], "summary": {...}}``.

    Args:
        requests: traced requests (see :func:`prepare_trace` for what is dropped or cut).
        capacity_tokens: arena size in tokens.
        max_model_len: longest sequence; also the "max" reservation.
        policy: "max", "oracle" or "pow2".
        clock: ``step_time`` and ``max_steps`` (:class:`ReplayClock`).

    Returns:
        ``steps``: per-step dicts with the five categories (tokens), ``step``, ``num_running``,
        ``num_waiting``; ``summary``: mean fraction of capacity per category over busy steps,
        ``utilization``, ``mean_batch``, ``steps``, ``finished``, ``requests``.

    Raises:
        ValueError: an unknown policy.
    """
    steps: list[dict[str, int]] = []
    last: ContiguousStep | None = None
    for last in contiguous_replay_steps(requests, capacity_tokens, max_model_len, policy, **clock):
        steps.append(contiguous_accounting(last))
    finished = last.finished if last else 0  # updated in place until the loop ended
    total = last.num_requests if last else len(prepare_trace(requests, max_model_len))
    return {"steps": steps, "summary": _summary(steps, capacity_tokens, finished, total)}


def _preempt_newest(
    m: KVCacheManager, running: list[tuple[TraceRequest, Request]], queue: list[tuple[TraceRequest, str]]
) -> None:
    # Recompute preemption (vLLM v1): free the newest running request, requeue it at the head with
    # what it has generated folded into its prompt.
    vtr, victim = running.pop()
    m.free(victim)
    rest = dataclasses.replace(vtr, prompt_len=victim.num_tokens, output_len=vtr.output_len - victim.num_output_tokens)
    queue.insert(0, (rest, victim.request_id))


def paged_replay_steps(
    requests: Sequence[TraceRequest],
    num_gpu_blocks: int,
    block_size: int,
    max_model_len: int,
    step_time: float = 0.05,
    max_steps: int = 100_000,
    id_prefix: str = "q",
) -> Iterator[dict[str, Any]]:
    """The paged replay loop, one step at a time (shared by ``replay_paged`` and the lab 01 widget).

    Each step: arrivals join the queue; every running request gets a slot for its next token (if
    the pool is short, the newest running request is preempted for recompute, as vLLM v1); queued
    requests are admitted while their prompts fit; then the state is yielded, and afterwards each
    running request samples one token and finished ones free their blocks.

    Yields:
        ``{"step", "manager" (the KVCacheManager), "running" ([(TraceRequest, Request)], ids
        ``<id_prefix><i>`` in arrival order), "num_waiting", "finished", "preemptions",
        "num_requests"}``; counts are cumulative. The same dict is updated in place, so after the
        loop it holds the final counts. Do not mutate it.
    """
    reqs = prepare_trace(requests, max_model_len)
    m = KVCacheManager(block_size, num_gpu_blocks, max_model_len)
    queue: list[tuple[TraceRequest, str]] = []
    running: list[tuple[TraceRequest, Request]] = []
    state: dict[str, Any] = {"manager": m, "finished": 0, "preemptions": 0, "num_requests": len(reqs)}
    i = step = 0
    while (i < len(reqs) or queue or running) and step < max_steps:
        while i < len(reqs) and reqs[i].arrival_time <= step * step_time:
            queue.append((reqs[i], f"{id_prefix}{i}"))
            i += 1
        k = 0  # decode: every running request needs a slot for the token it sampled last step
        while k < len(running):
            if m.allocate_slots(running[k][1], 1) is not None:
                running[k][1].num_computed_tokens += 1
                k += 1
            else:
                _preempt_newest(m, running, queue)  # maybe running[k] itself, which ends the loop
                state["preemptions"] += 1
        while queue:
            tr, rid = queue[0]
            req = Request(rid, [0] * tr.prompt_len)
            if m.allocate_slots(req, tr.prompt_len) is None:
                break
            queue.pop(0)
            req.num_computed_tokens = tr.prompt_len
            running.append((tr, req))
        state.update(step=step, running=running, num_waiting=len(queue))
        yield state
        still = []
        for tr, req in running:  # sample one token each; finished requests leave
            req.append_output_token_ids(0)
            if req.num_output_tokens >= tr.output_len:
                m.free(req)
                state["finished"] += 1
            else:
                still.append((tr, req))
        running = still
        step += 1


def paged_accounting(state: dict[str, Any]) -> dict[str, int]:
    """One step of the paged replay (a state :func:`paged_replay_steps` yields), accounted as
    :func:`contiguous_accounting` does; ``reservation`` and ``external`` are always 0."""
    m, running = state["manager"], state["running"]
    acc = dict.fromkeys(CATEGORIES, 0)
    for _, req in running:
        acc["used"] += req.num_computed_tokens
        acc["internal"] += len(m.get_block_ids(req.request_id)) * m.block_size - req.num_computed_tokens
    acc["free"] = m.num_free_blocks * m.block_size
    acc.update(step=state["step"], num_running=len(running), num_waiting=state["num_waiting"])
    return acc


def replay_paged(
    requests: Sequence[TraceRequest],
    num_gpu_blocks: int,
    block_size: int,
    max_model_len: int,
    **clock: Unpack[ReplayClock],
) -> dict[str, Any]:
    """Replay ``requests`` through the real ``KVCacheManager`` (blocks allocated on demand).

    Same stepping (``clock``: :class:`ReplayClock`) and accounting as ``replay_contiguous``;
    ``reservation`` and ``external`` are always 0 and ``internal`` is the unused tail of each
    request's last block. When a decode finds no free block the newest running request is
    preempted (recompute: freed and put back at the head of the queue), as vLLM v1.

    Returns:
        the same structure as ``replay_contiguous``, plus ``summary["preemptions"]``.
    """
    capacity = num_gpu_blocks * block_size
    steps: list[dict[str, int]] = []
    state: dict[str, Any] = {
        "finished": 0,
        "preemptions": 0,
        "num_requests": len(prepare_trace(requests, max_model_len)),
    }
    for state in paged_replay_steps(requests, num_gpu_blocks, block_size, max_model_len, **clock):
        steps.append(paged_accounting(state))
    summary = _summary(steps, capacity, state["finished"], state["num_requests"])
    summary["preemptions"] = state["preemptions"]
    return {"steps": steps, "summary": summary}
