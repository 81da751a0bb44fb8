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
"""
from __future__ import annotations

import bisect
import csv
from dataclasses import dataclass
from datetime import datetime
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request

CATEGORIES = ("used", "reservation", "internal", "external", "free")


@dataclass(frozen=True)
class TraceRequest:
    """One traced request: arrival (seconds from the trace start), prompt and output lengths (tokens)."""

    arrival: float
    prompt_len: int
    output_len: int


def load_azure_trace(path: str, limit: Optional[int] = None) -> List[TraceRequest]:
    """Read an Azure LLM inference trace CSV (columns TIMESTAMP, ContextTokens, GeneratedTokens)."""
    out: List[TraceRequest] = []
    t0 = None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            ts = datetime.fromisoformat(row["TIMESTAMP"][:26]).timestamp()
            t0 = ts if t0 is None else t0
            out.append(TraceRequest(ts - t0, int(row["ContextTokens"]), max(1, int(row["GeneratedTokens"]))))
            if limit is not None and len(out) >= limit:
                break
    return out


def reservation_size(prompt_len: int, output_len: int, max_model_len: int, policy: str) -> int:
    """Tokens reserved for one request under ``policy`` ("max" | "oracle" | "pow2"), capped at max_model_len."""
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
        self.segments: List[Tuple[int, int]] = []  # (start, size), sorted by start

    def holes(self) -> List[int]:
        """Sizes of the free gaps, in address order."""
        out, pos = [], 0
        for start, size in self.segments:
            if start > pos:
                out.append(start - pos)
            pos = start + size
        if self.capacity > pos:
            out.append(self.capacity - pos)
        return out

    def allocate(self, size: int) -> Optional[int]:
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
        i = bisect.bisect_left(self.segments, (start, -1))
        assert self.segments[i][0] == start, f"no segment at {start}"
        del self.segments[i]


def _clip(reqs: List[TraceRequest], max_model_len: int) -> List[TraceRequest]:
    # Requests whose prompt does not fit are dropped; outputs are cut to fit max_model_len.
    return [TraceRequest(r.arrival, r.prompt_len, min(r.output_len, max_model_len - r.prompt_len))
            for r in reqs if r.prompt_len < max_model_len]


def _summary(steps: List[Dict[str, int]], capacity: int, finished: int, total: int) -> Dict[str, float]:
    busy = [s for s in steps if s["num_running"]] or steps
    out = {f"{c}_frac": sum(s[c] for s in busy) / (len(busy) * capacity) for c in CATEGORIES}
    occupied = sum(out[f"{c}_frac"] for c in CATEGORIES if c != "free")
    # The paper's Fig. 2 figure: share of the occupied KV memory that holds token states.
    out["utilization"] = out["used_frac"] / occupied if occupied else 0.0
    out["mean_batch"] = sum(s["num_running"] for s in busy) / len(busy)
    out.update(steps=len(steps), finished=finished, requests=total)
    return out


def replay_contiguous(requests: List[TraceRequest], capacity_tokens: int, max_model_len: int,
                      policy: str = "max", step_time: float = 0.05,
                      max_steps: int = 100_000) -> Dict[str, object]:
    """Replay ``requests`` with contiguous reservations; return ``{"steps": [...], "summary": {...}}``.

    Args:
        requests: traced requests (arrival seconds, prompt and output tokens).
        capacity_tokens: arena size in tokens.
        max_model_len: longest sequence; also the "max" reservation.
        policy: "max", "oracle" or "pow2".
        step_time: seconds per iteration (maps arrival times to steps).
        max_steps: safety cap on iterations.

    Returns:
        ``steps``: per-step dicts with the five categories (tokens), ``num_running``, ``num_waiting``;
        ``summary``: mean fraction of capacity per category over busy steps, ``utilization``,
        ``mean_batch``, ``finished``.
    """
    reqs = sorted(_clip(requests, max_model_len), key=lambda r: r.arrival)
    arena = FirstFitArena(capacity_tokens)
    pending, queue, running, steps, finished, i = list(reqs), [], [], [], 0, 0
    step = 0
    while (i < len(pending) or queue or running) and step < max_steps:
        while i < len(pending) and pending[i].arrival <= step * step_time:
            queue.append(pending[i])
            i += 1
        while queue:  # FCFS, head-of-line blocking
            r = queue[0]
            size = reservation_size(r.prompt_len, r.output_len, max_model_len, policy)
            start = arena.allocate(size)
            if start is None:
                break
            queue.pop(0)
            running.append([r, start, size, r.prompt_len])  # prefill now; first token sampled below
        acc = dict.fromkeys(CATEGORIES, 0)
        for r, _, size, cur in running:
            final = r.prompt_len + r.output_len
            acc["used"] += cur
            acc["reservation"] += final - cur
            acc["internal"] += size - final
        holes = arena.holes()
        need = reservation_size(queue[0].prompt_len, queue[0].output_len, max_model_len, policy) if queue else 0
        acc["external"] = sum(h for h in holes if h < need)
        acc["free"] = sum(holes) - acc["external"]
        acc.update(step=step, num_running=len(running), num_waiting=len(queue))
        steps.append(acc)
        still = []
        for entry in running:
            r, start = entry[0], entry[1]
            if entry[3] - r.prompt_len + 1 >= r.output_len:  # this step sampled the last token
                arena.free(start)
                finished += 1
            else:
                entry[3] += 1
                still.append(entry)
        running = still
        step += 1
    return {"steps": steps, "summary": _summary(steps, capacity_tokens, finished, len(reqs))}


def paged_replay_steps(requests: Sequence[TraceRequest], num_gpu_blocks: int, block_size: int,
                       max_model_len: int, step_time: float = 0.05, max_steps: int = 100_000,
                       id_prefix: str = "q") -> Iterator[Dict[str, object]]:
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
    reqs = sorted(_clip(list(requests), max_model_len), key=lambda r: r.arrival)
    m = KVCacheManager(block_size, num_gpu_blocks, max_model_len)
    queue: List[tuple] = []
    running: List[tuple] = []
    state: Dict[str, object] = {"manager": m, "finished": 0, "preemptions": 0, "num_requests": len(reqs)}
    i = step = 0
    while (i < len(reqs) or queue or running) and step < max_steps:
        while i < len(reqs) and reqs[i].arrival <= step * step_time:
            queue.append((reqs[i], f"{id_prefix}{i}"))
            i += 1
        # Decode: every running request needs a slot for the token it sampled last step.
        k = 0
        while k < len(running):
            tr, req = running[k]
            if m.allocate_slots(req, 1) is not None:
                req.num_computed_tokens += 1
                k += 1
                continue
            vtr, victim = running.pop()  # preempt the newest (maybe req itself), recompute later
            m.free(victim)
            state["preemptions"] += 1
            done = victim.num_output_tokens
            queue.insert(0, (TraceRequest(vtr.arrival, victim.num_tokens, vtr.output_len - done),
                             victim.request_id))
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


def replay_paged(requests: List[TraceRequest], num_gpu_blocks: int, block_size: int, max_model_len: int,
                 step_time: float = 0.05, max_steps: int = 100_000) -> Dict[str, object]:
    """Replay ``requests`` through the real ``KVCacheManager`` (blocks allocated on demand).

    Same stepping and accounting as ``replay_contiguous``; ``reservation`` and ``external`` are
    always 0 and ``internal`` is the unused tail of each request's last block. When a decode
    finds no free block the newest running request is preempted (recompute: freed and put back
    at the head of the queue), as vLLM v1.

    Returns:
        the same structure as ``replay_contiguous``, plus ``summary["preemptions"]``.
    """
    capacity = num_gpu_blocks * block_size
    steps: List[Dict[str, int]] = []
    state: Dict[str, object] = {"finished": 0, "preemptions": 0, "num_requests": 0}
    for state in paged_replay_steps(requests, num_gpu_blocks, block_size, max_model_len, step_time, max_steps):
        m, running = state["manager"], state["running"]
        acc = dict.fromkeys(CATEGORIES, 0)
        for tr, req in running:
            acc["used"] += req.num_computed_tokens
            acc["internal"] += len(m.get_block_ids(req.request_id)) * block_size - req.num_computed_tokens
        acc["free"] = m.num_free_blocks * block_size
        acc.update(step=state["step"], num_running=len(running), num_waiting=state["num_waiting"])
        steps.append(acc)
    finished, preemptions, reqs = state["finished"], state["preemptions"], range(state["num_requests"])
    summary = _summary(steps, capacity, finished, len(reqs))
    summary["preemptions"] = preemptions
    return {"steps": steps, "summary": summary}
