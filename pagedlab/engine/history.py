"""A bounded record: the engine's ``step_stats`` and ``finished_requests`` keep their last entries only.

An engine that serves for hours appends one ``StepStats`` per step and one finished ``Request``
(its prompt, output tokens and token times) per request; kept forever they grow without bound.
``History`` keeps the last ``maxlen`` and counts every one appended (``total``), so a reader that
polls between steps (``pagedlab.sim.replay``) takes exactly the new ones with ``since``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar, overload

T = TypeVar("T")


class History(Sequence[T], Generic[T]):
    """The last ``maxlen`` items appended, oldest first; read as a list (``len``, ``[i]``, slices, ``for``).

    Args:
        maxlen: how many items to keep (>= 1); appending past it drops the oldest.
    Attributes:
        total: items ever appended (dropped ones included); ``clear`` keeps it.
    Raises:
        ValueError: ``maxlen`` is not an int >= 1.
    """

    def __init__(self, maxlen: int) -> None:
        if isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1:
            raise ValueError(f"maxlen must be an int >= 1, got {maxlen!r}")
        self._items: deque[T] = deque(maxlen=maxlen)
        self.total = 0

    @property
    def maxlen(self) -> int:
        return self._items.maxlen or 0

    def append(self, item: T) -> None:
        self._items.append(item)
        self.total += 1

    def clear(self) -> None:
        self._items.clear()

    def since(self, total: int) -> list[T]:
        """The items appended after the first ``total`` (a ``total`` read earlier), oldest first.

        Raises:
            ValueError: some of them were already dropped (more than ``maxlen`` appended since).
        """
        new = self.total - total
        if new > len(self._items):
            raise ValueError(
                f"{new} items were appended since total={total} but only the last {len(self._items)} are kept "
                f"(maxlen={self.maxlen}); read more often or keep more"
            )
        return list(self._items)[len(self._items) - new :] if new > 0 else []

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return list(self._items)[i]
        return self._items[i]

    def __repr__(self) -> str:
        return f"History(maxlen={self.maxlen}, total={self.total}, kept={len(self)})"
