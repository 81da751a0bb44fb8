"""Waiting queues: FCFS (a deque) and priority (a heap), as vLLM v1 ``request_queue.py``."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from pagedlab.request import Request


class FCFSRequestQueue:
    """First come, first served. ``prepend_request`` puts a preempted request back at the head."""

    def __init__(self) -> None:
        self._q: deque[Request] = deque()

    def add_request(self, request: Request) -> None:
        self._q.append(request)

    def prepend_request(self, request: Request) -> None:
        self._q.appendleft(request)

    def peek_request(self) -> Request:
        return self._q[0]

    def pop_request(self) -> Request:
        return self._q.popleft()

    def remove_request(self, request: Request) -> None:
        self._q.remove(request)

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._q)


class PriorityRequestQueue:
    """Smallest ``(priority, arrival_time)`` first. A heap has no front, so ``prepend`` re-inserts."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, float, int, Request]] = []
        self._counter = 0  # tie-breaker so Requests are never compared

    def add_request(self, request: Request) -> None:
        heapq.heappush(self._heap, (request.priority, request.arrival_time, self._counter, request))
        self._counter += 1

    prepend_request = add_request

    def peek_request(self) -> Request:
        return self._heap[0][-1]

    def pop_request(self) -> Request:
        return heapq.heappop(self._heap)[-1]

    def remove_request(self, request: Request) -> None:
        self._heap = [e for e in self._heap if e[-1] is not request]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Request]:
        return iter(e[-1] for e in sorted(self._heap, key=lambda e: e[:3]))


RequestQueue = FCFSRequestQueue | PriorityRequestQueue


def create_request_queue(policy: str) -> RequestQueue:
    """The waiting queue for ``policy`` ("priority" or anything else = FCFS)."""
    return PriorityRequestQueue() if policy == "priority" else FCFSRequestQueue()
