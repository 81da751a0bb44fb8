"""One call at a time: the guard that makes a second ``generate`` / ``step`` fail at once instead of
stealing the running one's results.

``LLM.generate`` drives the shared engine and collects its own requests' outputs from each
``step()``. A second call made from inside the first (a tokenizer's ``decode`` run for a stop
string, a logging hook, a callback) or from another thread would step the same engine, take the
first call's finished outputs and drop them. pagedlab is not re-entrant: the second call raises
``ReentrantCallError`` before it touches the engine, naming what is running and what to do.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from pagedlab.errors import ReentrantCallError


class OneAtATime:
    """A non-blocking lock that remembers who holds it, for a clear error when it is taken.

    Attributes:
        holder: what runs now (``"LLM.generate"``, ``"LLMEngine.step"`` ...), or None.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.holder: str | None = None
        self._thread: int | None = None

    def busy_error(self, what: str) -> ReentrantCallError:
        """The error for ``what`` called while ``self.holder`` runs."""
        holder, same = self.holder or "another call", self._thread == threading.get_ident()
        how = (
            "from inside it (a tokenizer, a logging hook or a callback that calls back into the engine)"
            if same
            else "from another thread"
        )
        return ReentrantCallError(
            f"{what} was called while {holder} is running on the same engine, {how}; pagedlab's "
            f"LLM and LLMEngine are not re-entrant and serve one call at a time. Nothing was queued and "
            f"{holder} keeps its requests: call {what} after it returns"
            + ("" if same else " (or give each thread its own LLM)")
        )

    @contextlib.contextmanager
    def hold(self, what: str) -> Iterator[None]:
        """Hold the lock while the block runs.

        Raises:
            ReentrantCallError: at once, when something already holds it (this thread or another).
        """
        if not self._lock.acquire(blocking=False):
            raise self.busy_error(what)
        self.holder, self._thread = what, threading.get_ident()
        try:
            yield
        finally:
            self.holder, self._thread = None, None
            self._lock.release()
